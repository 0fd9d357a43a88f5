-- Question: which problems did the ingest meet, how often, and where first?
-- Grain: one row per (file, reason).
-- Parameters: none.
-- Columns: file, source, reason, count, first_line.
with

errors as (
    select * from ingest_errors
),

final as (
    select file, source, reason, count(*) as count, min(line) as first_line
    from errors
    group by all
)

select * from final
order by count desc, file
