-- Question: per UTC day, how long did each engine's step lines stand at each value of running, waiting,
--   in_system and live KV tokens, with each day's last line apart (its weight reaches into a later day)?
-- Grain: one row per (deployment, day, metric, value) of the temporary table int_concurrency_step_day_lines
--   (queries/int_concurrency_step_day_lines.sql: the step lines of every deployment, no window, with their UTC
--   day and whether each is its engine's last of the day).
-- Parameters: none.
-- Columns: deployment (as int_concurrency_step_lines names it), day, metric, value, dur and value_dur (the
--   lines' weights and value x weight, the day's last line weighing 0 here), lines, first_ts (as
--   int_concurrency_step_hist), tail_dur (the weight of the day's last line, on the row of its value; NULL on
--   the others). A window of whole days weighs a day's last line only when it holds the line after it, the
--   first of the next day with lines: attribution.analyses.concurrency merges these rows into
--   int_concurrency_step_hist's for any such window (kept per store commit).
-- Engine: DuckDB only (a store connection's kept frames); not run on Spark.
with

long as (
    unpivot int_concurrency_step_day_lines on running, waiting, in_system, kv_tokens into name metric value value
),

final as (
    select
        deployment, day, metric, value,
        sum(case when tail then 0 else dur end) as dur,
        sum(value * case when tail then 0 else dur end) as value_dur,
        count(*) as lines,
        min(ts) as first_ts,
        sum(dur) filter (where tail) as tail_dur
    from long
    group by all
)

select * from final
order by deployment, day, metric, value
