-- Question: which engine start served each request of the window, and what can its thresholds be compared on?
-- Grain: one row per request of int_analysis_requests inside the window.
-- Parameters: none (reads int_analysis_requests, and thr_starts: engine_starts rows (config_id, deployment,
--   engine, ts) registered by the caller).
-- Columns: rid (a row number), config_id (the latest start of the request's deployment and engine at or
--   before its arrival; where the request names no engine, of its deployment; else 'default:<engine>' or
--   'default:unknown'), engine, engine_version, deployment, workload, label, day (UTC date of arrival),
--   arrival, prompt_tokens, cached_tokens, output_tokens, prefill_tokens (prompt - cached, the prompt where
--   cached is unknown), ok, queue_s, ttft_s, tpot_s, e2e_s.
with

requests as (
    select row_number() over (order by arrival, deployment, workload, prompt_tokens) as rid, *
    from int_analysis_requests
    where in_window
),

-- each start holds from its first line to the next start of its deployment (and engine): the latest start at
-- or before an arrival is the one whose range holds it (a range join on these few rows is cheaper than ASOF)
starts as (
    select
        config_id, deployment, engine, ts,
        lead(ts) over (partition by deployment, engine order by ts, config_id) as next_ts,
        lead(ts) over (partition by deployment order by ts, config_id) as next_ts_any_engine
    from thr_starts
),

final as (
    select
        r.rid,
        coalesce(e.config_id, d.config_id, 'default:' || coalesce(r.engine, 'unknown')) as config_id,
        coalesce(r.engine, d.engine) as engine,
        r.engine_version,
        r.deployment,
        coalesce(r.workload, '(none)') as workload,
        r.label,
        strftime(timezone('UTC', r.arrival), '%Y-%m-%d') as day,
        r.arrival,
        r.prompt_tokens,
        r.cached_tokens,
        r.output_tokens,
        r.prompt_tokens - coalesce(r.cached_tokens, 0) as prefill_tokens,
        r.ok,
        r.queue_s,
        r.ttft_s,
        r.tpot_s,
        r.e2e_s
    from requests as r
    -- each request in at most one start's range per join (the ranges of a deployment's starts do not overlap),
    -- so one row per request; the requests read once (joined on rid, they were materialized and read three
    -- times: at 6M requests past the report's 1 GB cap)
    left join starts as e
        on r.deployment = e.deployment and r.engine = e.engine
       and r.arrival >= e.ts and (e.next_ts is null or r.arrival < e.next_ts)
    left join starts as d
        on r.engine is null and r.deployment = d.deployment
       and r.arrival >= d.ts and (d.next_ts_any_engine is null or r.arrival < d.next_ts_any_engine)
)

select * from final
