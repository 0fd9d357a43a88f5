"""Which query files have a Spark form beside them (`queries/<name>.spark.sql`, same header): the DuckDB SQL
that does not transpile (ASOF joins, list functions); each form's header names the construct under
`-- Not transpiled:`. A leaf module, so attribution.queries can ask without importing the Spark connection."""

from __future__ import annotations

SPARK_FORMS = {"stg_engine_steps", "stg_engine_config", "latency_by_prompt_bucket", "goodput_by_group",
               "slo_terms_by_group", "score_by_group", "concurrency_sampled", "memsplit_binding",
               "arrival_profile_by_group"}

# Forms kept for cost: the DuckDB text transpiles, but Spark runs it far slower (it computes a CTE again at
# each use); each form's header says so under `-- Engine:`, and a test runs both texts on DuckDB
COST_FORMS = {"stg_joined_requests"}


def spark_form(name: str) -> str:
    """The query file Spark runs for queries/<name>.sql."""
    return f"{name}.spark" if name in SPARK_FORMS or name in COST_FORMS else name
