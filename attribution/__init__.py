"""attribution: answers from LLM-serving logs (vLLM, SGLang, gateways, public traces)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("attribution")  # one definition: pyproject.toml's, as installed
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
