-- Question: which engine starts does a memory-split analysis look at, over which period, and with which pools
--   and running cap?
-- Grain: one row per engine start (engine_config row) whose period touches the window [$since, $until).
-- Parameters: $engine (VARCHAR or NULL: only starts of this engine), $deployments (VARCHAR[] or NULL: only
--   these deployments), $since, $until (TIMESTAMPTZ or NULL: open ends).
-- Columns: start_id (1, 2, ... by deployment and time), deployment, engine, version, model, started (the
--   start's first line), period_since, period_until (the start's period cut to the window: from the start, or
--   $since, to the deployment's next start, or $until; NULL = open), the engine_config memory facts
--   (kv_pool_tokens, kv_pool_bytes, state_pool_slots, state_pool_bytes, available_kv_bytes, max_concurrency,
--   max_model_len, block_size, mamba_page_padding, chunked_prefill_size, tp_size), flags (MAP as logged),
--   configured_cap (max_running_requests: SGLang's summary line, vLLM's max_num_seqs), observed_max_running
--   (the highest `running` of the start's step lines), cap (configured_cap, else observed_max_running),
--   cap_source ('configured' or 'observed'), step_lines.
with

config as (
    select
        *,
        lead(ts) over (partition by deployment order by ts, file, start_line) as next_ts
    from engine_config
    where deployment is not null
      and ($engine::varchar is null or engine = $engine::varchar)
      and ($deployments::varchar[] is null or list_contains($deployments::varchar[], deployment))
),

windowed as (
    select
        *,
        greatest(ts, coalesce($since::timestamptz, ts)) as period_since,
        case
            when next_ts is null then $until::timestamptz
            when $until::timestamptz is null then next_ts
            else least(next_ts, $until::timestamptz)
        end as period_until
    from config
    where ($until::timestamptz is null or ts < $until::timestamptz)
      and ($since::timestamptz is null or next_ts is null or next_ts > $since::timestamptz)
),

numbered as (
    select row_number() over (order by deployment, ts, file, start_line) as start_id, *
    from windowed
),

observed as (
    select n.start_id, max(s.running) as observed_max_running, count(s.running) as step_lines
    from numbered as n
    join engine_steps as s
        on s.deployment = n.deployment
       and s.ts >= n.period_since
       and (n.period_until is null or s.ts < n.period_until)
    where s.running is not null
    group by n.start_id
),

final as (
    select
        n.start_id,
        n.deployment,
        n.engine,
        n.version,
        n.model,
        n.ts as started,
        n.period_since,
        n.period_until,
        n.kv_pool_tokens,
        n.kv_pool_bytes,
        n.state_pool_slots,
        n.state_pool_bytes,
        n.available_kv_bytes,
        n.max_concurrency,
        n.max_model_len,
        n.block_size,
        n.mamba_page_padding,
        n.chunked_prefill_size,
        n.tp_size,
        n.flags,
        n.max_running_requests as configured_cap,
        o.observed_max_running,
        coalesce(n.max_running_requests, o.observed_max_running) as cap,
        case when n.max_running_requests is not null then 'configured'
             when o.observed_max_running is not null then 'observed' end as cap_source,
        coalesce(o.step_lines, 0) as step_lines
    from numbered as n
    left join observed as o on o.start_id = n.start_id
)

select * from final
order by start_id
