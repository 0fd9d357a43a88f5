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
-- Engine: the `-- @spark` block is kept for cost, not portability (the DuckDB text transpiles, but Spark
--   computes a CTE again at each use: its plan reads `requests` and `request_events` three times, the block's
--   once); both texts give the same rows (tests/test_spark_pruning.py: both on DuckDB, and the analyses on
--   Spark equal DuckDB's).
with

-- @duckdb
engine_all as (
    select * from requests
    where source_kind = 'engine' and request_key is not null
),

gateway_all as (
    select * from requests
    where source_kind = 'gateway' and request_key is not null
),

-- one row per key and side: only the keys with more than one row on a side (few) are ranked, a window over
-- every key is slow
engine_dups as (
    select request_key from engine_all group by request_key having count(*) > 1
),

gateway_dups as (
    select request_key from gateway_all group by request_key having count(*) > 1
),

engine_rows as (
    select * from engine_all anti join engine_dups using (request_key)
    union all
    select * from (
        select * from engine_all semi join engine_dups using (request_key)
        qualify row_number() over (
            partition by request_key
            order by (ttft_s is null)::int + (queue_s is null)::int + (e2e_s is null)::int
                + (output_tokens is null)::int, source, file, line
        ) = 1
    )
),

gateway_rows as (
    select * from gateway_all anti join gateway_dups using (request_key)
    union all
    select * from (
        select * from gateway_all semi join gateway_dups using (request_key)
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
-- @end

-- @spark
-- Spark: one pass over `requests` (Spark computes a CTE again at each use: the sides above, each ranked and
-- then joined, read `requests` and `request_events` three times). One window per key (rows without a key each
-- in a partition of their own place in the files: the partition only routes them) finds each side's row as
-- DuckDB ranks it (the smallest ordering key; NULLS LAST as flags, since a struct orders a NULL field first),
-- and one row of the key carries both sides' values
flagged as (
    select *, source_kind in ('engine', 'gateway') and request_key is not null as keyed
    from requests
),

sided as (
    select
        *,
        row_number() over (keys order by source_kind) as rn,
        min_by(
            case when keyed and source_kind = 'engine' then {
                'request_id': request_id, 'source': source, 'file': file, 'line': line, 'deployment': deployment,
                'label': label, 'engine': engine, 'engine_version': engine_version, 'model': model,
                'workload': workload, 'arrival': arrival, 'first_token': first_token, 'finished': finished,
                'queue_s': queue_s, 'ttft_s': ttft_s, 'tpot_s': tpot_s, 'e2e_s': e2e_s, 'prefill_s': prefill_s,
                'decode_s': decode_s, 'prompt_tokens': prompt_tokens, 'output_tokens': output_tokens,
                'cached_tokens': cached_tokens, 'max_tokens': max_tokens, 'stream': stream, 'status': status,
                'http_status': http_status, 'finish_reason': finish_reason, 'error': error, 'cost': cost,
                'block_hashes': block_hashes
            } end,
            case when keyed and source_kind = 'engine' then {
                'untimed': (ttft_s is null)::int + (queue_s is null)::int + (e2e_s is null)::int
                    + (output_tokens is null)::int,
                'no_source': source is null, 'source': coalesce(source, ''),
                'no_file': file is null, 'file': coalesce(file, ''), 'no_line': line is null, 'line': coalesce(line, 0)
            } end
        ) over keys as e,
        min_by(
            case when keyed and source_kind = 'gateway' then {
                'request_id': request_id, 'source': source, 'file': file, 'line': line, 'deployment': deployment,
                'label': label, 'model': model, 'key_alias': key_alias, 'key_hash': key_hash, 'team': team,
                'user': "user", 'workload': workload, 'arrival': arrival, 'first_token': first_token,
                'finished': finished, 'ttft_s': ttft_s, 'tpot_s': tpot_s, 'e2e_s': e2e_s,
                'prompt_tokens': prompt_tokens, 'output_tokens': output_tokens, 'cached_tokens': cached_tokens,
                'max_tokens': max_tokens, 'stream': stream, 'status': status, 'http_status': http_status,
                'finish_reason': finish_reason, 'error': error, 'cost': cost
            } end,
            case when keyed and source_kind = 'gateway' then {
                'no_file': file is null, 'file': coalesce(file, ''), 'no_line': line is null, 'line': coalesce(line, 0)
            } end
        ) over keys as g
    from flagged
    window keys as (
        partition by keyed, case when keyed then request_key end, case when not keyed then file end,
            case when not keyed then line end
    )
),

-- a key's first row as its matched row, every row without a key as itself (one select: a union of two
-- filters of `sided` would compute it twice)
all_rows as (
    select
        case when keyed then coalesce(e['request_id'], g['request_id']) else request_id end as request_id,
        request_key,
        case when not keyed then (case when source_kind in ('trace', 'bench') then source_kind
                                       else source_kind || '_only' end)
             when e is not null and g is not null then 'both'
             when e is not null then 'engine_only' else 'gateway_only' end as matched,
        case when keyed then coalesce(e['source'], g['source']) else source end as source,
        case when keyed then e['source'] when source_kind = 'engine' then source end as engine_source,
        case when keyed then g['source'] when source_kind = 'gateway' then source end as gateway_source,
        case when keyed then (case when e is not null then 'engine' else 'gateway' end) else source_kind end
            as source_kind,
        case when keyed then coalesce(e['file'], g['file']) else file end as file,
        case when keyed then coalesce(e['line'], g['line']) else line end as line,
        case when keyed then coalesce(e['deployment'], g['deployment']) else deployment end as deployment,
        case when keyed then coalesce(e['label'], g['label']) else label end as label,
        case when keyed then e['engine'] else engine end as engine,
        case when keyed then e['engine_version'] else engine_version end as engine_version,
        case when keyed then coalesce(e['model'], g['model']) else model end as model,
        case when keyed then g['key_alias'] else key_alias end as key_alias,
        case when keyed then g['key_hash'] else key_hash end as key_hash,
        case when keyed then g['team'] else team end as team,
        case when keyed then g['user'] else "user" end as "user",
        case when keyed then coalesce(g['workload'], e['workload']) else workload end as source_workload,
        case when keyed then coalesce(e['arrival'], g['arrival']) else arrival end as arrival,
        case when keyed then g['arrival'] when source_kind = 'gateway' then arrival end as gateway_arrival,
        case when keyed then coalesce(e['first_token'], g['first_token']) else first_token end as first_token,
        case when keyed then coalesce(e['finished'], g['finished']) else finished end as finished,
        case when keyed then e['queue_s'] else queue_s end as queue_s,
        case when keyed then coalesce(e['ttft_s'], g['ttft_s']) else ttft_s end as ttft_s,
        case when keyed then coalesce(e['tpot_s'], g['tpot_s']) else tpot_s end as tpot_s,
        case when keyed then coalesce(e['e2e_s'], g['e2e_s']) else e2e_s end as e2e_s,
        case when keyed then g['e2e_s'] when source_kind = 'gateway' then e2e_s end as gateway_e2e_s,
        case when keyed then e['prefill_s'] else prefill_s end as prefill_s,
        case when keyed then e['decode_s'] else decode_s end as decode_s,
        case when keyed then coalesce(e['prompt_tokens'], g['prompt_tokens']) else prompt_tokens end
            as prompt_tokens,
        case when keyed then coalesce(e['output_tokens'], g['output_tokens']) else output_tokens end
            as output_tokens,
        case when keyed then coalesce(e['cached_tokens'], g['cached_tokens']) else cached_tokens end
            as cached_tokens,
        case when keyed then coalesce(e['max_tokens'], g['max_tokens']) else max_tokens end as max_tokens,
        case when keyed then coalesce(g['stream'], e['stream']) else stream end as stream,
        case when keyed then coalesce(g['status'], e['status']) else status end as status,
        case when keyed then coalesce(g['http_status'], e['http_status']) else http_status end as http_status,
        case when keyed then coalesce(e['finish_reason'], g['finish_reason']) else finish_reason end
            as finish_reason,
        case when keyed then coalesce(g['error'], e['error']) else error end as error,
        case when keyed then coalesce(g['cost'], e['cost']) else cost end as cost,
        case when keyed then e['block_hashes'] else block_hashes end as block_hashes
    from sided
    where (keyed and rn = 1) or not keyed
),
-- @end


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
