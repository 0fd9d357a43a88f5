"""The capacity section's gateway-spend part: one sentence on what the gateway billed (or that it billed
nothing, and why that may be), the spend table beside the cost table, and the billed-against-GPU chart.
Reading and arranging only: the numbers are capacity's (attribution.analyses.spend)."""

from __future__ import annotations

from functools import partial

from attribution.analyses import Analysis
from attribution.analyses.spend import summary
from attribution.charts import spend as spend_charts
from attribution.columns import view
from attribution.report.model import Section

COLUMNS = ["deployment", "gateway_requests", "billed_requests", "billed_usd", "billed_usd_per_m_input",
           "billed_usd_per_m_output", "gpu_usd", "gpu_usd_per_m_output", "billed_share_of_gpu_cost", "billing"]


def spend_part(s: Section, a: Analysis) -> None:
    """Add the spend sentence, table and chart to the capacity section `s` when capacity has a spend table
    (a gateway logged requests of the window)."""
    spend = a.tables.get("spend")
    if spend is None:
        return
    text = summary(spend)
    s.lines.append(f"Gateway spend: {text}.")
    s.table("spend", a.titles["spend"], view(spend, COLUMNS))
    s.chart("spend", partial(spend_charts.billed_vs_gpu, a))
