-- Question: per UTC day and five-minute bucket, how high did each engine's step lines go and how long did they
--   stand, with each day's last line's weight apart (it reaches into a later day)?
-- Grain: one row per (deployment, day, bucket) holding at least one line of the temporary table
--   int_concurrency_step_day_lines (queries/int_concurrency_step_day_lines.sql: every deployment's step lines,
--   no window, with their UTC day, five-minute bucket and last line of the day; a line counts in the bucket it
--   was printed in, as concurrency_sampled_timeseries counts it).
-- Parameters: none.
-- Columns: deployment (as int_concurrency_step_lines names it), day, bucket, running_max, waiting_max,
--   in_system_max, kv_tokens_max, in_system_dur (in_system x weight) and dur (the weights; the day's last line
--   weighing 0 here), in_system_sum and lines (for the lines' average where no time is weighted), first_ts and
--   last_ts (the bucket's first and last line), tail_dur and tail_in_system (the day's last line's weight and
--   in_system, on its bucket's row; NULL on the others). attribution.analyses.concurrency merges these rows into
--   concurrency_sampled_timeseries' for any window of whole days and any bucket that is a multiple of 300 s
--   (kept per store commit).
-- Engine: DuckDB only (a store connection's kept frames); not run on Spark.
with

final as (
    select
        deployment, day, bucket,
        max(running)::bigint as running_max,
        max(waiting)::bigint as waiting_max,
        max(in_system)::bigint as in_system_max,
        max(kv_tokens) as kv_tokens_max,
        sum(in_system * case when tail then 0 else dur end) as in_system_dur,
        sum(case when tail then 0 else dur end) as dur,
        sum(in_system) as in_system_sum,
        count(*) as lines,
        min(ts) as first_ts,
        max(ts) as last_ts,
        sum(dur) filter (where tail) as tail_dur,
        sum(in_system) filter (where tail) as tail_in_system
    from int_concurrency_step_day_lines
    group by all
)

select * from final
order by deployment, day, bucket
