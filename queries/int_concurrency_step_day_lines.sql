-- Question: which UTC day is each engine step line of, and is it its engine's last line of that day?
-- Grain: one row per row of the temporary table int_concurrency_step_lines (queries/int_concurrency_step_lines.sql,
--   materialised for every deployment and no window).
-- Parameters: none.
-- Columns: those of int_concurrency_step_lines, day (the line's UTC date), bucket (epoch_us(ts) // 300,000,000:
--   the five-minute bucket it was printed in; a day holds whole buckets) and tail (the day's last line of its
--   engine: the latest, of tied instants the one weighing the time to the next day's line).
-- Read by concurrency_step_days and concurrency_step_day_series (materialised once for both).
-- Engine: DuckDB only (a store connection's kept frames); not run on Spark.
with

final as (
    select
        *,
        cast(timezone('UTC', ts) as date) as day,
        epoch_us(ts) // 300000000 as bucket,
        row_number() over (partition by deployment, cast(timezone('UTC', ts) as date) order by ts desc, dur desc) = 1
            as tail
    from int_concurrency_step_lines
)

select * from final
