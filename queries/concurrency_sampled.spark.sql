-- Question: for deployments that have only the engine's own step lines, how many requests ran and waited at
--   once, and how many KV tokens were live, as far as those samples show?
-- Grain: one row per (deployment, metric); metric is running, waiting, in_system or kv_tokens.
-- Parameters: :quantiles (array<double>: the percentiles as fractions, compared as DECIMAL(18, 6)); reads the
--   temporary table int_concurrency_step_lines.
-- Columns: as queries/concurrency_sampled.sql.
-- Engine: the Spark form of queries/concurrency_sampled.sql (Spark SQL: the percentile index from
--   `sequence` and `element_at` instead of DuckDB's generate_subscripts, the ordered list from a sorted
--   collect_list of structs); tests/test_spark.py checks the two agree.
-- Dialect: spark
-- Not transpiled: `generate_subscripts` (sqlglot leaves it as it is; Spark has no such function) and the
--   ordered list aggregate `list(v order by i)` (no Spark aggregate keeps an order).
with

long as (
    select * from int_concurrency_step_lines
    unpivot (value for metric in (running, waiting, in_system, kv_tokens))
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
    select cast(element_at(qs, i) as decimal(18, 6)) as q, i
    from (select qs, explode(sequence(1, size(qs))) as i from (select cast(:quantiles as array<double>) as qs))
),

per_quantile as (
    select c.deployment, c.metric, qs.i, min(c.value) filter (where c.cum >= qs.q * c.total) as v
    from cumulative as c cross join quantiles as qs
    group by all
),

listed as (
    -- in the order of :quantiles, NULLs kept (DuckDB's list(v order by i))
    select deployment, metric, transform(array_sort(collect_list(struct(i, v))), x -> x.v) as q
    from per_quantile
    group by all
),

final as (
    select
        c.deployment,
        cast(null as string) as grp,
        c.metric,
        p.peak,
        min(c.ts) filter (where c.value = p.peak) as peak_at,
        coalesce(sum(c.value * c.dur) / nullif(sum(c.dur), 0), avg(c.value)) as mean,
        any_value(l.q) as q,
        max(c.total) / 1e6 as span_s,
        cast(null as bigint) as arrivals,
        p.lines
    from cumulative as c
    join peaks as p on p.deployment = c.deployment and p.metric = c.metric
    join listed as l on l.deployment = c.deployment and l.metric = c.metric
    group by c.deployment, c.metric, p.peak, p.lines
)

select * from final
order by deployment nulls last, array_position(array('running', 'waiting', 'in_system', 'kv_tokens'), metric)
