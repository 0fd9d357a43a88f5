-- Question: which engine step lines (with a running count) fall inside the period of each start under analysis?
-- Grain: one row per (start, engine_steps line with a running count inside the start's period); reads the
--   temporary table int_memsplit_periods (queries/int_memsplit_periods.sql).
-- Parameters: none.
-- Columns: start_id, deployment, engine_index, ts, line, kind, running, waiting, kv_usage, state_usage,
--   prefix_hit_rate, kv_tokens (as engine_steps has them).
-- Read by int_memsplit_starts (the observed running cap) and int_memsplit_lines (the lines themselves).
with

periods as (
    select * from int_memsplit_periods
),

final as (
    select
        p.start_id,
        s.deployment,
        s.engine_index,
        s.ts,
        s.line,
        s.kind,
        s.running,
        s.waiting,
        s.kv_usage,
        s.state_usage,
        s.prefix_hit_rate,
        s.kv_tokens
    from engine_steps as s
    join periods as p
        on s.deployment = p.deployment
       and s.ts >= p.period_since
       and (p.period_until is null or s.ts < p.period_until)
    where s.running is not null
)

select * from final
