-- Question: at each engine step line of the starts under analysis, was the running cap binding with requests
--   waiting while the KV pool had room, and how much did the line stand for?
-- Grain: one row per engine_steps line (with a running count) inside a start's period; reads the temporary
--   tables int_memsplit_step_lines and int_memsplit_starts (queries/int_memsplit_starts.sql).
-- Parameters: $kv_low (DOUBLE: KV usage below this is "room left", e.g. 0.8), $max_gap_s (DOUBLE: a line
--   stands for the time to the next line of its engine, at most this long; engines print nothing while idle).
-- Columns: start_id, deployment, rank (engine_index, 0 when absent), ts, line, kind, running, waiting,
--   kv_usage, state_usage, prefix_hit_rate, live_tokens (the line's KV token count, else KV usage x the
--   start's KV pool), demand
--   (running + waiting: what would run without a cap), demand_tokens (live_tokens x demand / running: the
--   waiting requests assumed to hold as many tokens as the running ones; 0 when nothing runs), gap_s (from
--   the previous line of the same engine), w_s (weight: seconds to the next line, at most $max_gap_s; 0 for
--   the last line), at_cap (running >= cap), queued (waiting > 0), binding (at_cap and queued and kv_usage <
--   $kv_low), kv_bound (queued and kv_usage >= $kv_low), prev_binding (the previous line of the engine was
--   binding; NULL for its first line).
with

starts as (
    select * from int_memsplit_starts
),

lines as (
    select
        st.start_id,
        s.deployment,
        coalesce(s.engine_index, 0) as rank,
        s.ts,
        s.line,
        s.kind,
        s.running,
        coalesce(s.waiting, 0) as waiting,
        s.kv_usage,
        s.state_usage,
        s.prefix_hit_rate,
        coalesce(s.kv_tokens::double, s.kv_usage * st.kv_pool_tokens) as live_tokens,
        st.cap
    from int_memsplit_step_lines as s
    join starts as st on st.start_id = s.start_id
),

timed as (
    select
        *,
        (epoch_us(ts) - epoch_us(lag(ts) over w)) / 1e6 as gap_s,
        least(coalesce((epoch_us(lead(ts) over w) - epoch_us(ts)) / 1e6, 0.0), $max_gap_s) as w_s,
        lag(coalesce(running >= cap and waiting > 0 and kv_usage < $kv_low, false)) over w as prev_binding
    from lines
    window w as (partition by start_id, rank order by ts, line)
),

final as (
    select
        start_id,
        deployment,
        rank,
        ts,
        line,
        kind,
        running,
        waiting,
        kv_usage,
        state_usage,
        prefix_hit_rate,
        live_tokens,
        running + waiting as demand,
        case when running > 0 then live_tokens * (running + waiting) / running else 0.0 end as demand_tokens,
        gap_s,
        w_s,
        running >= cap as at_cap,
        waiting > 0 as queued,
        coalesce(running >= cap and waiting > 0 and kv_usage < $kv_low, false) as binding,
        coalesce(waiting > 0 and kv_usage >= $kv_low, false) as kv_bound,
        prev_binding
    from timed
)

select * from final
