-- Question: which Prometheus histogram series parts ($kind 'histogram') or counters ($kind 'counter') have a
--   sample (before $until), each with one small integer id that metric_increase.sql and
--   metric_increase_days.sql partition, join and order their samples by?
-- Grain: one row per series (deployment, model, engine, metric, series, part, le) with a sample whose time and
--   value are set (and time before $until).
-- Parameters: $kind ('histogram': metric_histograms, 'counter': metric_counters), $until (TIMESTAMPTZ or null:
--   open end).
-- Columns: deployment, model, engine, metric, series, part, le (the labels, NULL where the samples have none),
--   sid (1, 2, ... in the order of the series' key: which labels are NULL, then the labels; the order a window's
--   sums over series follow, so a window's series keep their order whatever other series there are).
with

stored as (
    select deployment, model, engine, metric, series, part, le
    from metric_histograms
    where $kind = 'histogram' and ts is not null and value is not null and ($until is null or ts < $until)
    union all
    select deployment, model, engine, metric, series, null as part, null as le
    from metric_counters
    where $kind = 'counter' and ts is not null and value is not null and ($until is null or ts < $until)
),

final as (
    -- one small integer per series: sorting millions of samples by seven text columns costs several times what
    -- a join of them to these few rows does
    select
        *,
        row_number() over (
            order by
                -- the series' key with no NULL in it: each NULL as a flag, and a stand-in value
                (deployment is null)::int + 2 * (model is null)::int + 4 * (engine is null)::int
                    + 8 * (metric is null)::int + 16 * (series is null)::int + 32 * (part is null)::int
                    + 64 * (le is null)::int,
                coalesce(deployment, ''), coalesce(model, ''), coalesce(engine, ''), coalesce(metric, ''),
                coalesce(series, ''), coalesce(part, ''), coalesce(le, 0)
        ) as sid
    from (select distinct * from stored)
)

select * from final
