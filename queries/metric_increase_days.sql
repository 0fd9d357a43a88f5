-- Question: how much did each Prometheus histogram series part ($kind 'histogram') or counter ($kind 'counter')
--   grow on each UTC day, series by series, so that a window of whole days sums its days' rows
--   (metric_increase_from_days.sql) instead of reading every sample again?
-- Grain: one row per series (deployment, model, engine, metric, series, part, le) and UTC day with a sample;
--   the store's every sample, no window.
-- Parameters: $kind ('histogram': metric_histograms, 'counter': metric_counters). Reads int_metric_series, made
--   with the same $kind and no $until.
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

deduplicated as (
    -- one value per sample: the same scrape read from two overlapping exports counts once; each sample with its
    -- series' small integer id (int_metric_series, as metric_increase.sql), joined on the labels, NULL matching
    -- NULL: the window below partitions by it, not by seven text columns
    select sid, ts, max(value) as value
    from stored as k
    join int_metric_series as i
        on k.deployment is not distinct from i.deployment and k.model is not distinct from i.model
       and k.engine is not distinct from i.engine and k.metric is not distinct from i.metric
       and k.series is not distinct from i.series and k.part is not distinct from i.part
       and k.le is not distinct from i.le
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
    select deployment, model, engine, metric, series, part, le, day, increase, samples, resets, first_ts, last_ts
    from per_day
    join int_metric_series using (sid)
)

select * from final
order by deployment, model, engine, metric, series, part, le, day
