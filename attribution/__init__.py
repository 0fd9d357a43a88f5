"""attribution: answers from LLM-serving logs (vLLM, SGLang, gateways, public traces)."""

__version__ = "0.1.0"
