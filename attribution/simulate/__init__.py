"""Discrete-event simulation of continuous-batching engine pods (vLLM/SGLang-like), producing request rows
and engine time series in the shapes the rest of the tool reads. Scenarios and engine profiles are TOML
data in `scenarios/` and `profiles/`; see `simulate()`.
"""

from attribution.simulate.model import Scenario, load_scenario
from attribution.simulate.result import SimResult
from attribution.simulate.run import simulate

__all__ = ["Scenario", "SimResult", "load_scenario", "simulate"]
