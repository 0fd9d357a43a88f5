-- Question: what does each deployment give us to count concurrency: per-request intervals, only the engine's
--   own step lines, or only arrivals?
-- Grain: one row per deployment with requests or engine step lines in the window [$since, $until).
-- Parameters: $since, $until (TIMESTAMPTZ or NULL).
-- Columns: deployment, requests (arriving in the window), with_interval (arrival and end known),
--   split_known (also queue_s known), arrival_only (arrival known, end not), step_lines (engine_steps rows
--   with a running count), steps_peak_running, steps_peak_waiting (max over those lines),
--   configured_max_running (max_running_requests of the newest engine start that states it: vLLM's
--   max_num_seqs, SGLang's max_running_requests; NULL when unset, never the KV-derived figure below),
--   kv_concurrency_at_max_len (vLLM's startup `Maximum concurrency for N tokens per request: Xx`: how many
--   requests of max_model_len tokens the KV pool holds; not a limit), engine, version (of the newest start),
--   kv_pool_tokens, gpus (tp_size), source: exact (sweep over intervals), sampled (engine step lines only),
--   estimate (arrivals only: needs a service model), none.
with

requests as (
    select
        deployment,
        count(*) filter (where in_window) as requests,
        count(*) filter (where in_window and t_end > t_arrival) as with_interval,
        count(*) filter (where in_window and t_end > t_arrival and t_admit is not null) as split_known,
        count(*) filter (where in_window and t_arrival is not null and t_end is null) as arrival_only
    from int_analysis_requests
    group by deployment
),

steps as (
    select
        deployment,
        count(*) as step_lines,
        max(running) as steps_peak_running,
        max(waiting) as steps_peak_waiting
    from engine_steps
    where running is not null
      and ($since::timestamptz is null or ts >= $since::timestamptz)
      and ($until::timestamptz is null or ts < $until::timestamptz)
    group by deployment
),

configs as (
    select
        deployment,
        arg_max(max_running_requests, ts) filter (where max_running_requests is not null) as configured_max_running,
        arg_max(max_concurrency, ts) filter (where max_concurrency is not null) as kv_concurrency_at_max_len,
        arg_max(engine, ts) filter (where engine is not null) as engine,
        arg_max(version, ts) filter (where version is not null) as version,
        arg_max(kv_pool_tokens, ts) filter (where kv_pool_tokens is not null) as kv_pool_tokens,
        arg_max(tp_size, ts) filter (where tp_size is not null) as gpus
    from engine_config
    where $until::timestamptz is null or ts < $until::timestamptz
    group by deployment
),

final as (
    select
        coalesce(r.deployment, s.deployment) as deployment,
        coalesce(r.requests, 0) as requests,
        coalesce(r.with_interval, 0) as with_interval,
        coalesce(r.split_known, 0) as split_known,
        coalesce(r.arrival_only, 0) as arrival_only,
        coalesce(s.step_lines, 0) as step_lines,
        s.steps_peak_running,
        s.steps_peak_waiting,
        c.configured_max_running,
        c.kv_concurrency_at_max_len,
        c.engine,
        c.version,
        c.kv_pool_tokens,
        c.gpus,
        case
            when coalesce(r.with_interval, 0) > 0 then 'exact'
            when coalesce(s.step_lines, 0) > 0 then 'sampled'
            when coalesce(r.arrival_only, 0) > 0 then 'estimate'
            else 'none'
        end as source
    from requests as r
    full outer join steps as s on r.deployment = s.deployment
    left join configs as c on c.deployment = coalesce(r.deployment, s.deployment)
    where coalesce(r.requests, 0) > 0 or coalesce(s.step_lines, 0) > 0
)

select * from final
order by deployment
