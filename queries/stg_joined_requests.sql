-- Question: one row per request, with who sent it (gateway) and how the engine served it.
-- Grain: one row per request: engine and gateway rows matched on request_key; unmatched rows of either
--   side stay (matched = 'engine_only' / 'gateway_only'); trace and benchmark rows pass through
--   (matched = 'trace' / 'bench').
-- Parameters: none.
-- Precedence where both sides have a value:
--   from the gateway: workload, key_alias, key_hash, team, user, stream, status, http_status, error
--     (the client-facing outcome), cost (USD the gateway billed); gateway_arrival and gateway_e2e_s keep the
--     gateway's own clock;
--   from the engine: deployment (the pod), engine, engine_version, arrival, first_token, finished, queue_s,
--     ttft_s, tpot_s, e2e_s, prefill_s, decode_s, prompt/output/cached tokens (the engine's tokenizer),
--     finish_reason, block_hashes; each falls back to the gateway's value when the engine has none.
--   Several engine rows with one key (a vLLM log and OTel spans of the same request): the row with the most
--   timings wins. workload: workloads.toml mapping of the key hash, alias or team, else the key alias, team or
--   hashed key, else the served model, else the deployment.
-- Engine: the `-- @spark` blocks are kept for cost, not portability (the DuckDB text transpiles, but Spark
--   computes a CTE again at each use); both texts give the same rows (tests/test_spark_pruning.py: both on
--   DuckDB, and the analyses on Spark equal DuckDB's).
with

engine_all as (
    select * from requests
    where source_kind = 'engine' and request_key is not null
),

gateway_all as (
    select * from requests
    where source_kind = 'gateway' and request_key is not null
),

-- one row per key and side. DuckDB ranks only the keys with more than one row on a side (few): a window over
-- every key is slow. Spark ranks every key's rows (most have one): the dups CTEs would read `requests` four
-- times per side, where one window reads each side once, partitioned by request_key as the full outer join
-- below needs (no second shuffle)
-- @duckdb
engine_dups as (
    select request_key from engine_all group by request_key having count(*) > 1
),

gateway_dups as (
    select request_key from gateway_all group by request_key having count(*) > 1
),

-- @end
engine_rows as (
-- @duckdb
    select * from engine_all anti join engine_dups using (request_key)
    union all
    select * from (
        select * from engine_all semi join engine_dups using (request_key)
-- @spark
    select * from (
        select * from engine_all
-- @end
        qualify row_number() over (
            partition by request_key
            order by (ttft_s is null)::int + (queue_s is null)::int + (e2e_s is null)::int
                + (output_tokens is null)::int, source, file, line
        ) = 1
    )
),

gateway_rows as (
-- @duckdb
    select * from gateway_all anti join gateway_dups using (request_key)
    union all
    select * from (
        select * from gateway_all semi join gateway_dups using (request_key)
-- @spark
    select * from (
        select * from gateway_all
-- @end
        qualify row_number() over (partition by request_key order by file, line) = 1
    )
),

unkeyed as (
    select * from requests
    where (source_kind in ('engine', 'gateway') and request_key is null)
       or source_kind not in ('engine', 'gateway')
),

matched as (
    select
        coalesce(e.request_id, g.request_id) as request_id,
        coalesce(e.request_key, g.request_key) as request_key,
        case when e.request_key is not null and g.request_key is not null then 'both'
             when e.request_key is not null then 'engine_only' else 'gateway_only' end as matched,
        coalesce(e.source, g.source) as source,
        e.source as engine_source,
        g.source as gateway_source,
        coalesce(e.source_kind, g.source_kind) as source_kind,
        coalesce(e.file, g.file) as file,
        coalesce(e.line, g.line) as line,
        coalesce(e.deployment, g.deployment) as deployment,
        coalesce(e.label, g.label) as label,
        e.engine,
        e.engine_version,
        coalesce(e.model, g.model) as model,
        g.key_alias,
        g.key_hash,
        g.team,
        g."user",
        coalesce(g.workload, e.workload) as source_workload,
        coalesce(e.arrival, g.arrival) as arrival,
        g.arrival as gateway_arrival,
        coalesce(e.first_token, g.first_token) as first_token,
        coalesce(e.finished, g.finished) as finished,
        e.queue_s,
        coalesce(e.ttft_s, g.ttft_s) as ttft_s,
        coalesce(e.tpot_s, g.tpot_s) as tpot_s,
        coalesce(e.e2e_s, g.e2e_s) as e2e_s,
        g.e2e_s as gateway_e2e_s,
        e.prefill_s,
        e.decode_s,
        coalesce(e.prompt_tokens, g.prompt_tokens) as prompt_tokens,
        coalesce(e.output_tokens, g.output_tokens) as output_tokens,
        coalesce(e.cached_tokens, g.cached_tokens) as cached_tokens,
        coalesce(e.max_tokens, g.max_tokens) as max_tokens,
        coalesce(g.stream, e.stream) as stream,
        coalesce(g.status, e.status) as status,
        coalesce(g.http_status, e.http_status) as http_status,
        coalesce(e.finish_reason, g.finish_reason) as finish_reason,
        coalesce(g.error, e.error) as error,
        coalesce(g.cost, e.cost) as cost,
        e.block_hashes
    from engine_rows as e
    full outer join gateway_rows as g on e.request_key = g.request_key
),

passthrough as (
    select
        request_id, request_key,
        case when source_kind in ('trace', 'bench') then source_kind else source_kind || '_only' end as matched,
        source,
        case when source_kind = 'engine' then source end as engine_source,
        case when source_kind = 'gateway' then source end as gateway_source,
        source_kind, file, line, deployment, label, engine, engine_version, model,
        key_alias, key_hash, team, "user", workload as source_workload,
        arrival, case when source_kind = 'gateway' then arrival end as gateway_arrival,
        first_token, finished, queue_s, ttft_s, tpot_s, e2e_s,
        case when source_kind = 'gateway' then e2e_s end as gateway_e2e_s,
        prefill_s, decode_s, prompt_tokens, output_tokens, cached_tokens, max_tokens, stream, status,
        http_status, finish_reason, error, cost, block_hashes
    from unkeyed
),

all_rows as (
    select * from matched
    union all by name
    select * from passthrough
),

final as (
    select
        r.* exclude (source_workload),
        coalesce(by_hash.name, by_alias.name, by_team.name, r.key_alias, r.team,
                 'key-' || left(r.key_hash, 12), r.source_workload, r.model, r.deployment) as workload
    from all_rows as r
    left join workload_map as by_hash on by_hash.match = r.key_hash
    left join workload_map as by_alias on by_alias.match = r.key_alias
    left join workload_map as by_team on by_team.match = r.team
)

select * from final
