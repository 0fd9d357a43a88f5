-- Question: which engine step rows do the analyses read, when Prometheus scrapes sit next to log step lines?
-- Grain: one row per log step line (kind stats, prefill, decode, iteration, ...) as stored, plus one row per
--   Prometheus scrape (kind `scrape`: deployment, engine_index, ts, label) of a deployment that has no log step
--   line within 120 s of it: a scrape never doubles a window the engine's own lines already count. Scrapes
--   of one deployment, engine_index and time from several files are one.
-- Parameters: none.
-- Columns: those of raw_engine_steps. A scrape's gauges may be stored as partial rows (a snapshot read in
--   chunks, an export in batches): they are folded here, each gauge from the row that has it.
-- Used as the `engine_steps` view only when the store holds scrape rows (attribution.views).
-- Not transpiled: the `asof left join` (Spark SQL has no ASOF join and sqlglot does not rewrite one): on Spark
--   the nearest log line on each side of a scrape is found by window functions. That form is DuckDB SQL too
--   and gives the same rows (tests/test_spark.py), but DuckDB keeps its ASOF join over millions of step lines
--   (the two were not timed against each other).
with

logs as (
    select * from raw_engine_steps where kind is distinct from 'scrape'
),

log_times as (
    select distinct deployment, ts from logs where deployment is not null and ts is not null
),

-- one scrape per (deployment, engine, time, label) whatever the file: two exports of one series (a
-- query_range saved twice, overlapping ranges) hold the same samples
scrapes as (
    select
        ts, min(source) as source, any_value(source_kind) as source_kind, min(file) as file,
        arg_min(line, file) as line, deployment, label, any_value(engine) as engine, engine_index, kind,
        max(running) as running, max(waiting) as waiting, max(swapped) as swapped, max(kv_usage) as kv_usage,
        max(cpu_kv_usage) as cpu_kv_usage, max(swa_usage) as swa_usage, max(state_usage) as state_usage,
        max(prefix_hit_rate) as prefix_hit_rate, max(cpu_prefix_hit_rate) as cpu_prefix_hit_rate,
        max(prompt_tput) as prompt_tput, max(gen_tput) as gen_tput, max(kv_tokens) as kv_tokens
    from raw_engine_steps
    where kind = 'scrape'
    group by all
),

-- @duckdb
nearest as (
    select s.*, p.ts as prev_log
    from scrapes as s
    asof left join log_times as p on s.deployment = p.deployment and s.ts >= p.ts
),

both_sides as (
    select n.*, q.ts as next_log
    from nearest as n
    asof left join log_times as q on n.deployment = q.deployment and n.ts <= q.ts
),
-- @spark
edges as (
    -- each scrape time between the log times of its deployment: a log line at the same instant counts on
    -- both sides (the ASOF joins' >= and <=)
    select deployment, ts, is_scrape,
        max(log_ts) over (partition by deployment order by ts, is_scrape
                          rows between unbounded preceding and current row) as prev_log,
        -- (a frame running back from the current row: Spark recomputes one running forward for every row)
        min(log_ts) over (partition by deployment order by ts desc, is_scrape
                          rows between unbounded preceding and current row) as next_log
    from (
        select deployment, ts, 0 as is_scrape, ts as log_ts from log_times
        union all
        select distinct deployment, ts, 1 as is_scrape, cast(null as timestamptz) as log_ts from scrapes
    )
),

both_sides as (
    select s.*, e.prev_log, e.next_log
    from scrapes as s
    left join edges as e on e.is_scrape = 1 and s.deployment = e.deployment and s.ts = e.ts
),
-- @end

kept as (
    select * exclude (prev_log, next_log)
    from both_sides
    where (prev_log is null or ts - prev_log > interval 120 second)
      and (next_log is null or next_log - ts > interval 120 second)
),

final as (
    select * from logs
    union all by name
    select * from kept
)

select * from final
