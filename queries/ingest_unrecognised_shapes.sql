-- Question: which shapes of line did the ingest not recognise most often in the current files?
-- Grain: one row per unrecognised (file, source, shape) of ingest_line_shapes, the $limit most frequent.
-- Parameters: $limit (INTEGER: how many rows).
-- Columns: file, source, shape (numbers, ids and strings masked), lines, first_line, sample (redacted).
with

shapes as (
    select * from ingest_line_shapes where class = 'unrecognised'
),

current_files as (
    select file from ingest_files where not rotated
),

final as (
    select s.file, s.source, s.shape, s.lines, s.first_line, s.sample
    from shapes as s
    join current_files as f on f.file = s.file
)

select * from final
order by lines desc, file, first_line
limit $limit
