-- Question: how long a time do the step lines of these deployments span (to pick a time-series bucket)?
-- Grain: one row.
-- Parameters: none: reads the temporary table int_concurrency_step_lines (queries/int_concurrency_step_lines.sql).
-- Columns: span_s (seconds from the first to the last line of the longest-running deployment; 0 when none).
with

spans as (
    select epoch(max(ts) - min(ts)) as span_s
    from int_concurrency_step_lines
    group by deployment
),

final as (
    select coalesce(max(span_s), 0)::double as span_s from spans
)

select * from final
