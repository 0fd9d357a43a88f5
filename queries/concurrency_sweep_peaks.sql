-- Question: per deployment (and group), the peak of each concurrency metric, when it was first reached, and
--   the span the sweep covers?
-- Grain: one row per (by_group, deployment, grp, metric) with at least one state of the sweep
--   (int_concurrency_sweep).
-- Parameters: none; reads the temporary table int_concurrency_sweep (queries/int_concurrency_sweep.sql).
-- Columns: by_group, deployment, grp, metric (running, waiting, in_system, kv_tokens = the larger of a state's
--   ends, seen_at_arrival = the others in the system at an arrival), peak, peak_t (first instant at the
--   peak, microseconds since the epoch), t_first (first instant), t_last (end of the last state).
with

valued as (
    select 'running' as metric, by_group, deployment, grp, t, dur_us, running::double as v
    from int_concurrency_sweep
    union all
    select 'waiting', by_group, deployment, grp, t, dur_us, waiting::double from int_concurrency_sweep
    union all
    select 'in_system', by_group, deployment, grp, t, dur_us, in_system::double from int_concurrency_sweep
    union all
    select 'kv_tokens', by_group, deployment, grp, t, dur_us, greatest(kv_start, kv_end)
    from int_concurrency_sweep
    union all
    select 'seen_at_arrival', by_group, deployment, grp, t, dur_us, (in_system - 1)::double
    from int_concurrency_sweep where arrivals > 0
),

topped as (
    select *, max(v) over (partition by by_group, deployment, grp, metric) as top
    from valued
),

final as (
    select
        by_group, deployment, grp, metric,
        max(v) as peak,
        min(case when v = top then t end) as peak_t,
        min(t) as t_first,
        max(t + dur_us) as t_last
    from topped
    group by by_group, deployment, grp, metric
)

select * from final
