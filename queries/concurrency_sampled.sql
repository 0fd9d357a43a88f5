-- Question: for deployments that have only the engine's own step lines, how many requests ran and waited at
--   once, and how many KV tokens were live, as far as those samples show?
-- Grain: one row per (deployment, metric); metric is running, waiting, in_system or kv_tokens. An engine with
--   several data-parallel ranks (engine_index > 0) is reported per rank as `deployment #rank`.
-- Parameters: $quantiles (DOUBLE[]: the percentiles as fractions, compared as DECIMAL(18, 6)); reads the
--   temporary table int_concurrency_step_hist (queries/int_concurrency_step_hist.sql: the time at each value of
--   the step lines of int_concurrency_step_lines, which takes the window, the deployments and $max_gap_s; or the
--   same rows merged from the per-day histograms of concurrency_step_days).
-- Columns: deployment, grp (NULL), metric, peak, peak_at, mean, q (the list of percentiles in the order of
--   $quantiles, spread into p50, ..., p99_9 by attribution; each line weighted by the time to the next line of
--   its engine, capped at $max_gap_s; pXX = the smallest value v such that the lines with values <= v cover at
--   least XX% of the weighted time), span_s (weighted time), arrivals (NULL), lines.
--   kv_tokens and the weights as int_concurrency_step_lines defines them.
-- These are samples: a peak between two lines is missed.
-- Computed from the time at each value (per deployment, metric and value: weighted time, lines, first instant),
--   so the window sums run over distinct values; tests/oracle/concurrency_sampled_lines.sql states the same
--   answer line by line (tests/test_concurrency.py compares them).
-- Not transpiled: `generate_subscripts` (sqlglot leaves it as it is; Spark has no such function) and the
--   ordered list aggregate `list(v order by i)` (sqlglot drops the order): on Spark the percentile index from
--   sequence and element_at, the ordered list from a sorted collect_list of structs; tests/test_spark.py
--   checks the two agree.
with

-- the time at each value (a line weighted by its dur), per deployment and metric: the percentiles, mean and peak
-- follow from it, so the window sums below run over distinct values, not over every line
cumulative as (
    select
        deployment, metric, value, dur, value_dur, lines, first_ts,
        sum(dur) over (partition by deployment, metric order by value) as cum,
        sum(dur) over (partition by deployment, metric) as total,
        max(value) over (partition by deployment, metric) as peak
    from int_concurrency_step_hist
),

quantiles as (
-- @duckdb
    select unnest($quantiles::double[])::decimal(18, 6) as q, generate_subscripts($quantiles::double[], 1) as i
-- @spark
    select cast(element_at(qs, i) as decimal(18, 6)) as q, i
    from (select qs, explode(sequence(1, size(qs))) as i from (select $quantiles::double[] as qs))
-- @end
),

per_quantile as (
    select c.deployment, c.metric, qs.i, min(c.value) filter (where c.cum >= qs.q * c.total) as v
    from cumulative as c, quantiles as qs
    group by all
),

listed as (
-- @duckdb
    select deployment, metric, list(v order by i) as q
-- @spark
    -- in the order of $quantiles, NULLs kept
    select deployment, metric, transform(array_sort(collect_list(struct(i, v))), x -> x.v) as q
-- @end
    from per_quantile
    group by all
),

final as (
    select
        c.deployment,
        null::varchar as grp,
        c.metric,
        max(c.peak) as peak,
        min(c.first_ts) filter (where c.value = c.peak) as peak_at,
        coalesce(sum(c.value_dur) / nullif(sum(c.dur), 0), sum(c.value * c.lines) / sum(c.lines)) as mean,
        any_value(l.q) as q,
        max(c.total) / 1e6 as span_s,
        null::bigint as arrivals,
        sum(c.lines)::bigint as lines
    from cumulative as c
    join listed as l on l.deployment = c.deployment and l.metric = c.metric
    group by c.deployment, c.metric
)

select * from final
order by deployment, list_position(['running', 'waiting', 'in_system', 'kv_tokens'], metric)
