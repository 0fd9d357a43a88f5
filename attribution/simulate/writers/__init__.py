"""Render a SimResult as the logs real deployments keep: vLLM V1 and SGLang console logs and LiteLLM
StandardLoggingPayload NDJSON, with request ids that join an engine row to its gateway row."""

from attribution.simulate.writers.litellm import write_litellm
from attribution.simulate.writers.sglang import write_sglang_logs
from attribution.simulate.writers.vllm import write_vllm_logs

__all__ = ["write_litellm", "write_sglang_logs", "write_vllm_logs"]
