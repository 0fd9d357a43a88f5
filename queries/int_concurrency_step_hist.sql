-- Question: how long did each engine's step lines stand at each value of running, waiting, in_system and live
--   KV tokens?
-- Grain: one row per (deployment, metric, value) of the temporary table int_concurrency_step_lines
--   (queries/int_concurrency_step_lines.sql, which takes the window, the deployments and $max_gap_s); metric is
--   running, waiting, in_system or kv_tokens (a line without the figure has no row for it).
-- Parameters: none.
-- Columns: deployment, metric, value, dur (the lines' weights, microseconds), value_dur (value x weight, summed),
--   lines, first_ts (the first line at the value).
-- Read by concurrency_sampled (materialised once per analysis). On a store connection a window of whole UTC days
--   gets the same rows merged from concurrency_step_days (attribution.analyses.concurrency).
with

long as (
    unpivot int_concurrency_step_lines on running, waiting, in_system, kv_tokens into name metric value value
),

final as (
    select
        deployment, metric, value,
        sum(dur) as dur,
        sum(value * dur) as value_dur,
        count(*) as lines,
        min(ts) as first_ts
    from long
    group by all
)

select * from final
