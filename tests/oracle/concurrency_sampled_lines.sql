-- Question: (line by line) for deployments that have only the engine's own step lines, how many requests ran and waited at
--   once, and how many KV tokens were live, as far as those samples show?
-- Grain: one row per (deployment, metric); metric is running, waiting, in_system or kv_tokens. An engine with
--   several data-parallel ranks (engine_index > 0) is reported per rank as `deployment #rank`.
-- Parameters: $quantiles (DOUBLE[]: the percentiles as fractions, compared as DECIMAL(18, 6)); reads the
--   temporary table int_concurrency_step_lines (queries/int_concurrency_step_lines.sql, which takes the window, the
--   deployments and $max_gap_s).
-- Columns: deployment, grp (NULL), metric, peak, peak_at, mean, q (the list of percentiles in the order of
--   $quantiles, spread into p50, ..., p99_9 by attribution; each line weighted by the time to the next line of
--   its engine, capped at $max_gap_s; pXX = the smallest value v such that the lines with values <= v cover at
--   least XX% of the weighted time), span_s (weighted time), arrivals (NULL), lines.
--   kv_tokens and the weights as int_concurrency_step_lines defines them.
-- These are samples: a peak between two lines is missed.
-- Oracle: a test reference for queries/concurrency_sampled.sql (the product path, which reduces the lines to
--   the time at each value first); tests/test_concurrency.py compares the two. The product never runs this file.
with

long as (
    unpivot int_concurrency_step_lines on running, waiting, in_system, kv_tokens into name metric value value
),

peaks as (
    select deployment, metric, max(value) as peak, count(*) as lines
    from long
    group by all
),

cumulative as (
    select
        deployment, metric, value, ts, dur,
        sum(dur) over (partition by deployment, metric order by value) as cum,
        sum(dur) over (partition by deployment, metric) as total
    from long
),

quantiles as (
    select unnest($quantiles::double[])::decimal(18, 6) as q, generate_subscripts($quantiles::double[], 1) as i
),

per_quantile as (
    select c.deployment, c.metric, qs.i, min(c.value) filter (where c.cum >= qs.q * c.total) as v
    from cumulative as c, quantiles as qs
    group by all
),

listed as (
    select deployment, metric, list(v order by i) as q
    from per_quantile
    group by all
),

final as (
    select
        c.deployment,
        null::varchar as grp,
        c.metric,
        p.peak,
        min(c.ts) filter (where c.value = p.peak) as peak_at,
        coalesce(sum(c.value * c.dur) / nullif(sum(c.dur), 0), avg(c.value)) as mean,
        any_value(l.q) as q,
        max(c.total) / 1e6 as span_s,
        null::bigint as arrivals,
        p.lines
    from cumulative as c
    join peaks as p on p.deployment = c.deployment and p.metric = c.metric
    join listed as l on l.deployment = c.deployment and l.metric = c.metric
    group by c.deployment, c.metric, p.peak, p.lines
)

select * from final
order by deployment, list_position(['running', 'waiting', 'in_system', 'kv_tokens'], metric)
