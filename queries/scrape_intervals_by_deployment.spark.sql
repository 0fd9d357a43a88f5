-- Question: which deployments' engine step rows are Prometheus scrapes, and at what interval were they taken?
-- Grain: one row per deployment with scrape rows (engine_steps kind `scrape`) in the window [$since, $until).
-- Parameters: $since, $until (TIMESTAMPTZ or NULL).
-- Columns: as queries/scrape_intervals_by_deployment.sql.
-- Engine: the Spark form of queries/scrape_intervals_by_deployment.sql, the same rows: the log line count
--   joined per deployment (Spark rejects the correlated scalar subquery inside the aggregate); DuckDB SQL too,
--   tests/test_spark.py checks the two agree.
with

steps as (
    select deployment, coalesce(engine_index, 0) as rank, ts, kind
    from engine_steps
    where ($since::timestamptz is null or ts >= $since::timestamptz)
      and ($until::timestamptz is null or ts < $until::timestamptz)
),

gaps as (
    select deployment, ts,
        epoch(ts - lag(ts) over (partition by deployment, rank order by ts)) as gap_s
    from (select distinct deployment, rank, ts from steps where kind = 'scrape')
),

-- a NULL deployment matches no row here, as it matched none in the subquery: its count is 0
log_lines as (
    select deployment, count(*) as log_lines
    from steps
    where kind <> 'scrape'
    group by deployment
),

final as (
    select
        g.deployment,
        count(distinct g.ts) as scrapes,
        median(g.gap_s) as interval_s,
        coalesce(max(l.log_lines), 0) as log_lines
    from gaps as g
    left join log_lines as l on l.deployment = g.deployment
    group by g.deployment
)

select * from final
order by deployment
