-- Question: how many requests arrived in each clock minute, per group (the per-minute rate over time)?
-- Grain: one row per (group, UTC clock minute) from the group's first arrival's minute to its last's, empty
--   minutes included with 0. Reads int_arrival_times.
-- Parameters: none.
-- Columns: grp, m (minutes since the epoch), minute (start of the minute, TIMESTAMPTZ), requests.
with

times as (
    select * from int_arrival_times
),

per_minute as (
    select grp, t // 60000000 as m, count(*) as n
    from times
    group by grp, m
),

spans as (
    select grp, unnest(range(min(m), max(m) + 1)) as m from per_minute group by grp
),

final as (
    select s.grp, s.m, to_timestamp(s.m * 60) as minute, coalesce(p.n, 0) as requests
    from spans as s
    left join per_minute as p on p.grp = s.grp and p.m = s.m
)

select * from final