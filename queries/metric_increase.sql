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
-- Not transpiled: the ordered sums (`end order by ts)`, `sum(increase order by sid)`): Spark has no ordered
--   aggregate, so there the sums run in Spark's order, equal to DuckDB's to the last bits (tests/test_spark.py
--   compares to 1e-9 relative). The Spark block also distributes the samples by series id, for cost: one
--   shuffle of the samples where the DuckDB text's plan has two.
with

-- @duckdb
-- (not materialized: read from the Parquet files by each of the two CTEs below that need it; DuckDB otherwise
-- keeps every sample with its seven text columns in memory, ~1.8 GB of 4.6M samples at 1M requests)
stored as not materialized (
-- @spark
stored as (
-- @end
    select deployment, model, engine, metric, series, part, le, ts, value
    from metric_histograms
    where $kind = 'histogram'
    union all
    select deployment, model, engine, metric, series, null as part, null as le, ts, value
    from metric_counters
    where $kind = 'counter'
),

kept as (
    select
        *,
        -- the series' key with no NULL in it (each NULL as a flag and a stand-in value): an equi-join on it
        (deployment is null)::int + 2 * (model is null)::int + 4 * (engine is null)::int + 8 * (metric is null)::int
            + 16 * (series is null)::int + 32 * (part is null)::int + 64 * (le is null)::int as nulls,
        coalesce(deployment, '') as k1, coalesce(model, '') as k2, coalesce(engine, '') as k3,
        coalesce(metric, '') as k4, coalesce(series, '') as k5, coalesce(part, '') as k6, coalesce(le, 0) as k7
    from stored
    where ts is not null and value is not null and ($until is null or ts < $until)
),

ids as (
    -- one small integer per series: sorting 4.6M samples (1M requests) by seven text columns for the window
    -- below cost several times what this join does. Only the key columns (`final` reads the labels back from
    -- them): with the labels too, DuckDB built the join below on the samples' side (the wider one at an equal
    -- row estimate), a hash table of every sample with its text, ~2 GB at 1M requests
    select *, row_number() over (order by nulls, k1, k2, k3, k4, k5, k6, k7) as sid
    from (select distinct nulls, k1, k2, k3, k4, k5, k6, k7 from kept)
),

samples as (
    -- one value per sample: the same scrape read from two overlapping exports counts once
    select sid, ts, max(value) as value
-- @duckdb
    from kept as k
    join ids as i using (nulls, k1, k2, k3, k4, k5, k6, k7)
-- @spark
    -- (the rows distributed by series: the max per sample, the window and the sum per series below keep to
    -- these partitions, one shuffle where the DuckDB text's plan has two)
    from (select i.sid, k.ts, k.value from kept as k join ids as i using (nulls, k1, k2, k3, k4, k5, k6, k7)
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
    join (select
              sid,
              case when (nulls & 1) = 0 then k1 end as deployment, case when (nulls & 2) = 0 then k2 end as model,
              case when (nulls & 4) = 0 then k3 end as engine, case when (nulls & 8) = 0 then k4 end as metric,
              case when (nulls & 32) = 0 then k6 end as part, case when (nulls & 64) = 0 then k7 end as le
          from ids) using (sid)
    group by all
)

select * from final
order by deployment, model, metric, part, le
