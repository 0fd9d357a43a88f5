-- Question: how much did each counter grow in the window, summed over
--   the series of one deployment, model and metric (PromQL `sum(increase(...))`)?
-- Grain: one row per (deployment, model, engine, metric); metric as exposed, `_total` included.
-- Parameters: $since, $until (TIMESTAMPTZ or null: open end).
-- Columns: deployment, model, engine, metric, increase (growth in the window, a drop being a counter
--   reset: the value after it counts whole; measured from the last sample before the window, else the first in
--   it, to the last in it: no extrapolation, so adjacent windows add up), series (label sets summed),
--   samples (in the window), resets, first_ts, last_ts (the samples in the window).
with

samples as (
    -- one value per sample: the same scrape read from two overlapping exports counts once
    select deployment, model, engine, metric, series, ts, max(value) as value
    from metric_counters
    where ts is not null and value is not null and ($until is null or ts < $until)
    group by all
),

steps as (
    select
        *,
        lag(value) over (partition by deployment, model, engine, metric, series order by ts) as prev
    from samples
),

per_series as (
    select
        deployment, model, engine, metric, series,
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
        deployment, model, engine, metric,
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
order by deployment, model, metric
