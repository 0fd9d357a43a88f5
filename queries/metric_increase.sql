-- Question: how much did each Prometheus histogram bucket, `_sum` and `_count` series ($kind 'histogram',
--   PromQL `sum by (le) (increase(...))`) or each counter ($kind 'counter', `sum(increase(...))`) grow in the
--   window, summed over the series of one deployment, model and metric?
-- Grain: one row per (deployment, model, engine, metric, part, le); bucket rows have le (inf for +Inf);
--   counters have neither part nor le (their metric is the name as exposed, `_total` included).
-- Parameters: $kind ('histogram': metric_histograms, 'counter': metric_counters), $since, $until
--   (TIMESTAMPTZ or null: open end).
-- Columns: deployment, model, engine, metric, part, le, increase (growth in the window, a drop being a counter
--   reset: the value after it counts whole; measured from the last sample before the window, else the first in
--   it, to the last in it: no extrapolation, so adjacent windows add up), series (label sets summed),
--   samples (in the window), resets, first_ts, last_ts (the samples in the window).
with

stored as (
    select deployment, model, engine, metric, series, part, le, ts, value
    from metric_histograms
    where $kind = 'histogram'
    union all
    select deployment, model, engine, metric, series, null as part, null as le, ts, value
    from metric_counters
    where $kind = 'counter'
),

samples as (
    -- one value per sample: the same scrape read from two overlapping exports counts once
    select deployment, model, engine, metric, series, part, le, ts, max(value) as value
    from stored
    where ts is not null and value is not null and ($until is null or ts < $until)
    group by all
),

steps as (
    select
        *,
        lag(value) over (partition by deployment, model, engine, metric, series, part, le order by ts) as prev
    from samples
),

per_series as (
    select
        deployment, model, engine, metric, series, part, le,
        sum(case when prev is null then 0 when value < prev then value else value - prev end) as increase,
        count(*) as samples,
        count(*) filter (where value < prev) as resets,
        min(ts) as first_ts,
        max(ts) as last_ts
    from steps
    where $since is null or ts >= $since
    group by all
),

final as (
    select
        deployment, model, engine, metric, part, le,
        sum(increase) as increase,
        count(*) as series,
        sum(samples) as samples,
        sum(resets) as resets,
        min(first_ts) as first_ts,
        max(last_ts) as last_ts
    from per_series
    group by all
)

select * from final
order by deployment, model, metric, part, le
