"""The simulated LiteLLM gateway bills like LiteLLM with custom pricing: response_cost = (prompt - cached) x
input_cost_per_token + cached x cache_read_input_token_cost + output x output_cost_per_token, worked here from
each logged row's own usage; a scenario without a price logs 0.0 with the cost calculator's failure (read
back as no price). A bundle with one priced and one unpriced member, simulated, ingested and put through
`capacity`, gives the billed USD per pod and 'no price' for the other."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace

import pytest

from attribution.analyses import capacity, select
from attribution.errors import UsageError
from attribution.ingest import ingest, parse_path
from attribution.simulate import simulate
from attribution.simulate.model import SCENARIO_DIR, Pricing, load_scenario
from attribution.simulate.output import simulate_to_dir
from attribution.simulate.writers import write_litellm
from attribution.store import Store

PRICE = Pricing(input_cost_per_token=2e-7, output_cost_per_token=6e-7, cache_read_input_token_cost=5e-8)
PRICE_TOML = "\n[pricing]\ninput_cost_per_token = 2e-7\noutput_cost_per_token = 6e-7\ncache_read_input_token_cost = 5e-8\n"


def _by_hand(row: dict, p: Pricing) -> float:
    cached = row["metadata"]["usage_object"]["prompt_tokens_details"]["cached_tokens"] or 0
    return ((row["prompt_tokens"] - cached) * p.input_cost_per_token + cached * p.cache_read_input_token_cost
            + row["completion_tokens"] * p.output_cost_per_token)


@pytest.fixture(scope="module")
def run():
    return simulate("vllm-chat-small", requests=400, workers=1)


def test_priced_rows_bill_as_litellm_does(run, tmp_path):
    res = replace(run, scenario=replace(run.scenario, pricing=PRICE))
    gw = write_litellm(res, tmp_path / "gw.jsonl")
    rows = [json.loads(line) for line in gw.read_text().splitlines()]
    assert any(r["metadata"]["usage_object"]["prompt_tokens_details"]["cached_tokens"] for r in rows)  # prefix hits
    for r in rows:
        assert r["response_cost"] == pytest.approx(_by_hand(r, PRICE), rel=1e-12)
        assert r["hidden_params"]["response_cost"] == r["response_cost"]
        assert r["response_cost_failure_debug_info"] is None
    parsed = parse_path(gw, "litellm", deployment="gw").tables["requests"]
    assert parsed["cost"].sum() == pytest.approx(sum(_by_hand(r, PRICE) for r in rows), rel=1e-9)
    assert parsed["cost"].null_count() == 0


def test_unpriced_rows_log_zero_with_the_failure_and_read_as_no_price(run, tmp_path):
    gw = write_litellm(run, tmp_path / "gw.jsonl")  # vllm-chat-small has no [pricing]
    rows = [json.loads(line) for line in gw.read_text().splitlines()]
    assert all(r["response_cost"] == 0.0 and r["hidden_params"]["response_cost"] is None for r in rows)
    info = rows[0]["response_cost_failure_debug_info"]
    assert "isn't mapped" in info["error_str"] and info["custom_pricing"] is False
    parsed = parse_path(gw, "litellm", deployment="gw").tables["requests"]
    assert parsed.height == len(rows) and parsed["cost"].null_count() == parsed.height


def test_scenario_pricing_is_read_and_checked(tmp_path):
    text = (SCENARIO_DIR / "vllm-chat-small.toml").read_text()
    path = tmp_path / "priced.toml"
    path.write_text(text + PRICE_TOML)
    assert load_scenario(path).pricing == PRICE
    assert load_scenario("vllm-chat-small").pricing is None
    path.write_text(text + PRICE_TOML.replace("6e-7", "-6e-7"))
    with pytest.raises(UsageError, match="must not be negative"):
        load_scenario(path)
    path.write_text(text + "\n[pricing]\ninput_cost_per_token = 1e-7\n")
    with pytest.raises(UsageError, match="output_cost_per_token"):
        load_scenario(path)


def test_bundle_priced_and_unpriced_through_capacity(tmp_path):
    priced = tmp_path / "priced.toml"
    priced.write_text((SCENARIO_DIR / "vllm-chat-small.toml").read_text() + PRICE_TOML)
    bundle = tmp_path / "bundle.toml"
    bundle.write_text(f'name = "b"\n[[members]]\nscenario = "{priced}"\ndeployment = "paid-{{pod}}"\n'
                      '[[members]]\nscenario = "sglang-hybrid-small"\ndeployment = "free-{pod}"\n')
    out = tmp_path / "logs"
    truth = simulate_to_dir(bundle, out, requests=300, workers=1)
    gw = next(out / f["path"] for f in truth["files"] if f["format"] == "litellm")
    with (gzip.open(gw, "rt") if gw.suffix == ".gz" else gw.open()) as f:
        rows = [json.loads(line) for line in f]
    paid = sum(_by_hand(r, PRICE) for r in rows if r["api_base"].startswith("http://paid-"))
    assert paid > 0 and all(r["response_cost"] == 0.0 for r in rows if r["api_base"].startswith("http://free-"))
    ingest([str(out)], tmp_path / "store", year=truth["year"], tz="UTC")
    res = capacity(select(Store.open(tmp_path / "store").connect(), by="all"), gpu_hour_cost=2.0)
    spend = {r["deployment"]: r for r in res.tables["spend"].iter_rows(named=True)}
    assert spend["paid-0"]["billed_usd"] == pytest.approx(paid, rel=1e-9)
    assert spend["paid-0"]["billing"] == "billed" and spend["paid-0"]["gpu_usd"] > 0
    assert spend["free-0"]["billing"] == "no price" and spend["free-0"]["billed_usd"] is None
