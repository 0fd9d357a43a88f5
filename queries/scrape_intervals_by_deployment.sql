-- Question: which deployments' engine step rows are Prometheus scrapes, and at what interval were they taken?
-- Grain: one row per deployment with scrape rows (engine_steps kind `scrape`) in the window [$since, $until).
-- Parameters: $since, $until (TIMESTAMPTZ or NULL).
-- Columns: deployment, scrapes (distinct scrape times), interval_s (median seconds between consecutive
--   scrapes of one engine; NULL with a single scrape), log_lines (the deployment's log step lines in the
--   window: the scrapes stand only where those are absent, see stg_engine_steps).
-- Engine: one text for DuckDB and Spark (attribution.spark.transpile): the log lines are counted per
--   deployment and joined, as Spark rejects a correlated scalar subquery inside an aggregate.
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
