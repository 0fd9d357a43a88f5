-- Question: how much did each Prometheus histogram bucket, `_sum` and `_count` series ($kind 'histogram',
--   PromQL `sum by (le) (increase(...))`) or each counter ($kind 'counter', `sum(increase(...))`) grow in the
--   window, summed over the series of one deployment, model and metric?
-- Grain: one row per (deployment, model, engine, metric, part, le); bucket rows have le (inf for +Inf);
--   counters have neither part nor le (their metric is the name as exposed, `_total` included).
-- Parameters: $kind ('histogram': metric_histograms, 'counter': metric_counters), $since, $until
--   (TIMESTAMPTZ or null: open end). Reads int_metric_series, made with the same $kind and $until.
-- Columns: deployment, model, engine, metric, part, le, increase (growth in the window, a drop being a counter
--   reset: the value after it counts whole; measured from the last sample before the window, else the first in
--   it, to the last in it: no extrapolation, so adjacent windows add up), series (label sets summed),
--   samples (in the window), resets, first_ts, last_ts (the samples in the window).
-- Not transpiled: the ordered sums (`end order by ts)`, `sum(increase order by sid)`): Spark has no ordered
--   aggregate, so there the sums run in Spark's order, equal to DuckDB's to the last bits (tests/test_spark.py
--   compares to 1e-9 relative). The Spark block also distributes the samples by series id, for cost: one
--   shuffle of the samples where the DuckDB text's plan has two.
with

stored as (
    select deployment, model, engine, metric, series, part, le, ts, value
    from metric_histograms
    where $kind = 'histogram' and ts is not null and value is not null and ($until is null or ts < $until)
    union all
    select deployment, model, engine, metric, series, null as part, null as le, ts, value
    from metric_counters
    where $kind = 'counter' and ts is not null and value is not null and ($until is null or ts < $until)
),

samples as (
    -- one value per sample: the same scrape read from two overlapping exports counts once; each sample with its
    -- series' small integer id (int_metric_series), joined on the labels, NULL matching NULL
    select sid, ts, max(value) as value
-- @duckdb
    from stored as k
    join int_metric_series as i
-- @spark
    -- (the rows distributed by series: the max per sample, the window and the sum per series below keep to
    -- these partitions, one shuffle where the DuckDB text's plan has two)
    from (select i.sid, k.ts, k.value from stored as k join int_metric_series as i
-- @end
        on k.deployment is not distinct from i.deployment and k.model is not distinct from i.model
       and k.engine is not distinct from i.engine and k.metric is not distinct from i.metric
       and k.series is not distinct from i.series and k.part is not distinct from i.part
       and k.le is not distinct from i.le
-- @spark
          distribute by i.sid)
-- @end
    group by all
),

steps as (
    select
        *,
        lag(value) over (partition by sid order by ts) as prev
    from samples
),

per_series as (
    select
        sid,
        -- (summed in time order, and the series below in their order: a float sum in the order rows happen to
        -- arrive from parallel threads differs in its last bit from run to run, and a kept answer must equal
        -- the one computed again)
-- @duckdb
        sum(case when prev is null then 0 when value < prev then value else value - prev end order by ts)
            as increase,
-- @spark
        sum(case when prev is null then 0 when value < prev then value else value - prev end) as increase,
-- @end
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
-- @duckdb
        sum(increase order by sid) as increase,
-- @spark
        sum(increase) as increase,
-- @end
        count(*) as series,
        sum(samples) as samples,
        sum(resets) as resets,
        min(first_ts) as first_ts,
        max(last_ts) as last_ts
    from per_series
    join int_metric_series using (sid)
    group by all
)

select * from final
order by deployment, model, metric, part, le
