-- Question: how much did each Prometheus histogram series part ($kind 'histogram') or counter ($kind 'counter')
--   grow on each UTC day, series by series, so that a window of whole days sums its days' rows
--   (metric_increase_from_days.sql) instead of reading every sample again?
-- Grain: one row per series (deployment, model, engine, metric, series, part, le) and UTC day with a sample;
--   the store's every sample, no window.
-- Parameters: $kind ('histogram': metric_histograms, 'counter': metric_counters).
-- Columns: deployment, model, engine, metric, series, part, le, day (DATE, UTC), increase (growth over the day's
--   samples, each measured from the series' sample before it, that of an earlier day for the day's first: as
--   metric_increase.sql measures a window, so adjacent days add up to it; a drop is a reset, the value after it
--   counts whole), samples, resets, first_ts, last_ts (the day's samples).
with

stored as (
    select deployment, model, engine, metric, series, part, le, ts, value
    from metric_histograms
    where $kind = 'histogram' and ts is not null and value is not null
    union all
    select deployment, model, engine, metric, series, null as part, null as le, ts, value
    from metric_counters
    where $kind = 'counter' and ts is not null and value is not null
),

kept as (
    select
        ts, value,
        -- the series' key with no NULL in it (each NULL as a flag and a stand-in value), as metric_increase.sql
        (deployment is null)::int + 2 * (model is null)::int + 4 * (engine is null)::int + 8 * (metric is null)::int
            + 16 * (series is null)::int + 32 * (part is null)::int + 64 * (le is null)::int as nulls,
        coalesce(deployment, '') as k1, coalesce(model, '') as k2, coalesce(engine, '') as k3,
        coalesce(metric, '') as k4, coalesce(series, '') as k5, coalesce(part, '') as k6, coalesce(le, 0) as k7
    from stored
),

ids as (
    -- one small integer per series (as metric_increase.sql): the window below partitions by it, not by seven
    -- text columns
    select *, row_number() over (order by nulls, k1, k2, k3, k4, k5, k6, k7) as sid
    from (select distinct nulls, k1, k2, k3, k4, k5, k6, k7 from kept)
),

deduplicated as (
    -- one value per sample: the same scrape read from two overlapping exports counts once
    select sid, ts, max(value) as value
    from kept as k
    join ids as i using (nulls, k1, k2, k3, k4, k5, k6, k7)
    group by all
),

increments as (
    select
        sid, ts, value,
        (ts at time zone 'UTC')::date as day,
        lag(value) over (partition by sid order by ts) as prev
    from deduplicated
),

per_day as (
    select
        sid, day,
        -- (in time order, as metric_increase.sql sums a window)
        sum(case when prev is null then 0 when value < prev then value else value - prev end order by ts)
            as increase,
        count(*) as samples,
        count(*) filter (where value < prev) as resets,
        min(ts) as first_ts,
        max(ts) as last_ts
    from increments
    group by all
),

final as (
    select
        case when (nulls & 1) = 0 then k1 end as deployment, case when (nulls & 2) = 0 then k2 end as model,
        case when (nulls & 4) = 0 then k3 end as engine, case when (nulls & 8) = 0 then k4 end as metric,
        case when (nulls & 16) = 0 then k5 end as series, case when (nulls & 32) = 0 then k6 end as part,
        case when (nulls & 64) = 0 then k7 end as le,
        day, increase, samples, resets, first_ts, last_ts
    from per_day
    join ids using (sid)
)

select * from final
order by deployment, model, engine, metric, series, part, le, day
