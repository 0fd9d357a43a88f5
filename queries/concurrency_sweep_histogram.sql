-- Question: how long did each deployment (and group) spend at each concurrency value, and how many arrivals
--   found each number of others in the system?
-- Grain: one row per (by_group, deployment, grp, metric, value): the sweep's states (int_concurrency_sweep)
--   aggregated per value, a small histogram (at most one row per distinct count or KV token value).
-- Parameters: none; reads the temporary table int_concurrency_sweep (queries/int_concurrency_sweep.sql).
-- Columns: by_group, deployment, grp, metric (running, waiting, in_system, kv_tokens: weight = time at the
--   value in microseconds, a state of zero length counts with 0; kv_tokens at the state's mean rounded half
--   up to a whole token; seen_at_arrival: the others in the system at an arrival, weight = arrivals), value,
--   weight. attribution.analyses.sweep_sql makes the time-weighted mean and percentiles from it with
--   attribution.analyses.sweep's definitions.
-- Engine: the `-- @spark` block is kept for cost, not portability: one read of the states giving the five
--   metrics' rows (a `stack`), where the union reads them five times.
with

states as (
    select
        by_group, deployment, grp, dur_us, arrivals, running, waiting, in_system,
        (kv_start + kv_end) / 2 as kv_mean
    from int_concurrency_sweep
),

valued as (
-- @duckdb
    select 'running' as metric, by_group, deployment, grp, running::double as value, dur_us as weight
    from states
    union all
    select 'waiting', by_group, deployment, grp, waiting::double, dur_us from states
    union all
    select 'in_system', by_group, deployment, grp, in_system::double, dur_us from states
    union all
    select 'kv_tokens', by_group, deployment, grp,
        (floor(kv_mean) + case when kv_mean - floor(kv_mean) >= 0.5 then 1 else 0 end)::double, dur_us
    from states
    union all
    select 'seen_at_arrival', by_group, deployment, grp, (in_system - 1)::double, arrivals
    from states where arrivals > 0
-- @spark
    select metric, by_group, deployment, grp, value, weight
    from states
    lateral view stack(5,
        'running', running::double, dur_us,
        'waiting', waiting::double, dur_us,
        'in_system', in_system::double, dur_us,
        'kv_tokens', (floor(kv_mean) + case when kv_mean - floor(kv_mean) >= 0.5 then 1 else 0 end)::double, dur_us,
        'seen_at_arrival', (in_system - 1)::double, arrivals
    ) v as metric, value, weight
    where metric <> 'seen_at_arrival' or arrivals > 0
-- @end
),

final as (
    select by_group, deployment, grp, metric, value, sum(weight)::bigint as weight
    from valued
    group by by_group, deployment, grp, metric, value
)

select * from final
