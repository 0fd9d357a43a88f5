"""Replay export: the store's requests as a trace that load generators replay (Mooncake JSONL, AIPerf,
SGLang bench_serving, vLLM bench serve, BurstGPT CSV, our own CSV), optionally time-compressed, with the command
line of each generator; and the reader that turns such a trace (or a public one) into simulator arrivals.
selection.py picks and orders the requests, formats.py writes them, read.py reads traces back.
"""

from attribution.choices import Sessions, TraceFormat
from attribution.replay.formats import FORMATS, commands, write
from attribution.replay.read import read_trace
from attribution.replay.selection import Replay, replay_requests

__all__ = ["FORMATS", "Replay", "Sessions", "TraceFormat", "commands", "read_trace", "replay_requests", "write"]
