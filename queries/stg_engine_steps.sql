-- Question: which engine step rows do the analyses read, when Prometheus scrapes sit next to log step lines?
-- Grain: one row per log step line (kind stats, prefill, decode, iteration, ...) as stored, plus one row per
--   Prometheus scrape (kind `scrape`: deployment, engine_index, ts, label) of a deployment that has no log step
--   line within 120 s of it: a scrape never doubles a window the engine's own lines already count. Scrapes
--   of one deployment, engine_index and time from several files are one.
-- Parameters: none.
-- Columns: those of raw_engine_steps. A scrape's gauges may be stored as partial rows (a snapshot read in
--   chunks, an export in batches): they are folded here, each gauge from the row that has it.
-- Used as the `engine_steps` view only when the store holds scrape rows (attribution.views).
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
