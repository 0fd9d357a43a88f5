"""Gateway spend next to the GPU cost, for `capacity`: what the gateway billed (requests.cost, USD: LiteLLM's
`response_cost` or SpendLogs `spend`) per pod (and group) for the window's requests, its USD per million
tokens, and, with a GPU-hour price, what the pod's GPUs cost over the same span. The two amounts are shown
side by side and never added: one is a price the gateway charged its callers, the other our cost model."""

from __future__ import annotations

import polars as pl

from attribution.analyses.common import Selection, name_groups

TITLE = "gateway spend (USD billed per request) next to the GPU cost"
DEFINITIONS = {
    "gateway_requests": "requests a gateway logged (the rest reached the engine without one, or no gateway log "
    "was ingested)",
    "billed_requests": "gateway requests with a cost, 0 included (LiteLLM `response_cost`, SpendLogs `spend`, USD)",
    "unpriced_requests": "gateway requests without a cost: LiteLLM had no price for the model (it logs 0.0 "
    "with response_cost_failure_debug_info; self-hosted models often have none) or the log carries no cost",
    "billed_usd": "sum of the costs of the billed requests, USD; empty when no request had one",
    "billed_usd_per_m_input/output": "billed_usd / the input (output) tokens of the billed requests x 1e6, the "
    "whole amount charged to each token kind as the GPU cost per million is",
    "gpu_usd": "the pod's GPU cost over the span its requests took (first arrival to last end, as the cost per "
    "million): gpu_hour_cost x gpus x span; per pod only (a group does not own the pod's hours)",
    "gpu_usd_per_m_input/output": "usd_per_m_input/output of the cost table: the GPU cost per million tokens "
    "at the observed load",
    "billed_share_of_gpu_cost": "billed_usd / gpu_usd: above 100% the gateway billed more than the GPUs cost "
    "over the span, below it less; only where both are known",
    "billing": "billed; partly priced (some gateway requests had no cost); 0 billed (every cost was 0: a model "
    "priced at 0, or, in SpendLogs, one without a price, which LiteLLM also logs as 0); no price (no gateway "
    "request had a cost: nothing was billed that we can see); no gateway",
    "cost_sources": "the gateway formats whose costs were summed; costs are USD in each (LiteLLM bills USD)",
}


def spend_table(sel: Selection, per_group: bool, spans: pl.DataFrame, cost: pl.DataFrame | None,
                gpu_hour_cost: float | None) -> pl.DataFrame | None:
    """One row per pod (and group): the spend mart's figures next to the GPU cost. `spans`: capacity's keys
    and span_s per row; `cost`: capacity's cost table (None without a GPU-hour price). None when no request
    of the window was logged by a gateway (nothing to compare)."""
    billed = sel.run("spend_billed_by_deployment", per_group=per_group)
    if not billed.height or billed["gateway_requests"].sum() == 0:
        return None
    billed = name_groups(billed, sel.by) if per_group else billed.drop("grp")
    keys = [c for c in spans.columns if c != "span_s"]
    out = billed.select(
        *keys, "requests", "gateway_requests", "billed_requests", "unpriced_requests", "billed_usd",
        pl.col("usd_per_m_input").alias("billed_usd_per_m_input"),
        pl.col("usd_per_m_output").alias("billed_usd_per_m_output"), "billing", "cost_sources")
    if cost is not None and gpu_hour_cost is not None:
        gpu = cost.join(spans, on=keys, how="left").select(
            *keys,
            # per pod only: with groups, the span is the group's and the pod's hours are not the group's
            (pl.lit(float(gpu_hour_cost)) * pl.col("gpus") * pl.col("span_s") / 3600).alias("gpu_usd")
            if not per_group else pl.lit(None, pl.Float64).alias("gpu_usd"),
            pl.col("usd_per_m_input").alias("gpu_usd_per_m_input"),
            pl.col("usd_per_m_output").alias("gpu_usd_per_m_output"))
        out = out.join(gpu, on=keys, how="left", nulls_equal=True, maintain_order="left").with_columns(
            (pl.col("billed_usd") / pl.col("gpu_usd")).alias("billed_share_of_gpu_cost"))
    return out.select(pl.exclude("billing", "cost_sources"), "billing", "cost_sources")


def summary(spend: pl.DataFrame) -> str:
    """One plain sentence on the spend table: what the gateway billed in all, or that it billed nothing and
    why that may be (no price is not the same as a price of 0), and the GPU cost beside it."""
    gw, billed = int(spend["gateway_requests"].sum()), int(spend["billed_requests"].sum())
    if billed == 0:
        return (f"the gateway billed nothing: none of its {gw:,} requests had a price (LiteLLM logs 0.0 and a "
                "cost-failure note for a model it has no price for; self-hosted models often have none)")
    usd = float(spend["billed_usd"].sum())
    if usd == 0:
        text = (f"the gateway billed $0 for the {billed:,} requests with a cost (a price of 0; in SpendLogs "
                "possibly no price)")
    else:
        text = f"the gateway billed ${usd:,.2f} for {billed:,} of its {gw:,} requests"
    if billed < gw:
        text += f"; {gw - billed:,} had no price"
    if "gpu_usd" in spend.columns and spend["gpu_usd"].null_count() < spend.height:
        text += f"; the GPUs cost ${float(spend['gpu_usd'].sum()):,.2f} over the same spans"
    return text
