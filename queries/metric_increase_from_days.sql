-- Question: metric_increase.sql's rows for a window of whole UTC days, from the days' rows of
--   metric_increase_days.sql (the relation `metric_increase_days`: those rows, kept per store commit)?
-- Grain: one row per (deployment, model, engine, metric, part, le), as metric_increase.sql.
-- Parameters: $since_day, $until_day (DATE or null: an open end): the days in [$since_day, $until_day).
-- Columns: as metric_increase.sql: deployment, model, engine, metric, part, le, increase, series, samples,
--   resets, first_ts, last_ts. The increases equal its to the last bits (a series' days are summed day by day,
--   where it sums the window's samples in one run).
with

days as (
    select *
    from metric_increase_days
    where ($since_day::date is null or day >= $since_day::date)
      and ($until_day::date is null or day < $until_day::date)
),

per_series as (
    select
        deployment, model, engine, metric, series, part, le,
        sum(increase order by day) as increase,
        sum(samples) as samples,
        sum(resets) as resets,
        min(first_ts) as first_ts,
        max(last_ts) as last_ts
    from days
    group by all
),

final as (
    select
        deployment, model, engine, metric, part, le,
        sum(increase order by series nulls last) as increase,
        count(*) as series,
        sum(samples)::hugeint as samples,
        sum(resets)::hugeint as resets,
        min(first_ts) as first_ts,
        max(last_ts) as last_ts
    from per_series
    group by all
)

select * from final
order by deployment, model, metric, part, le
