-- Question: how many lines did the ingest parse, skip and not recognise, over the whole store?
-- Grain: one row per class of ingest_line_shapes (parsed, skipped, unrecognised).
-- Parameters: none.
-- Columns: class, lines.
with

shapes as (
    select * from ingest_line_shapes
),

final as (
    select class, sum(lines)::BIGINT as lines
    from shapes
    group by 1
)

select * from final
order by 1
