-- Question: which shapes of line did the ingest meet in each file, how often, and where first?
-- Grain: one row per (file, class, reason, shape); the store keeps one row per chunk (a file read in pieces
--   has several rows of a shape), users see one per file and shape.
-- Parameters: none.
-- Columns: the `ingest_line_shapes` columns of DESIGN.md: file, source, class (parsed / skipped /
--   unrecognised), reason, shape, lines (summed over the chunks), first_line (the smallest), sample (the one
--   of the first line).
with

raw as (
    select * from raw_ingest_line_shapes
),

final as (
    select
        file,
        any_value(source) as source,
        class,
        reason,
        shape,
        sum(lines)::BIGINT as lines,
        min(first_line) as first_line,
        arg_min(sample, first_line) as sample
    from raw
    group by file, class, reason, shape
)

select * from final
