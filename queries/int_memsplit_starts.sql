-- Question: which engine starts does a memory-split analysis look at, over which period, and with which pools
--   and running cap?
-- Grain: one row per start of the temporary table int_memsplit_periods (queries/int_memsplit_periods.sql);
--   reads int_memsplit_step_lines for the observed running counts.
-- Parameters: none (the window and the starts' filters are int_memsplit_periods').
-- Columns: start_id (1, 2, ... by deployment and time), deployment, engine, version, model, started (the
--   start's first line), period_since, period_until (the start's period cut to the window: from the start, or
--   $since, to the deployment's next start, or $until; NULL = open), the engine_config memory facts
--   (kv_pool_tokens, kv_pool_bytes, state_pool_slots, state_pool_bytes, available_kv_bytes, max_concurrency,
--   max_model_len, block_size, mamba_page_padding, chunked_prefill_size, tp_size), flags (MAP as logged),
--   configured_cap (max_running_requests: SGLang's summary line, vLLM's max_num_seqs), observed_max_running
--   (the highest `running` of the start's step lines), cap (configured_cap, else observed_max_running),
--   cap_source ('configured' or 'observed'), step_lines.
with

numbered as (
    select * from int_memsplit_periods
),

observed as (
    select start_id, max(running) as observed_max_running, count(running) as step_lines
    from int_memsplit_step_lines
    group by start_id
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
