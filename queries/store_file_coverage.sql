-- Question: how much of each current file did the ingest understand, and which files look unread?
-- Grain: one row per current (not rotated) file of ingest_files.
-- Parameters: none.
-- Columns: file, format, status, lines, parsed, skipped, unrecognised (line counts), parsed_pct, skipped_pct,
--   unrecognised_pct (percent of lines, one decimal), flag ('no rows from its lines': read with lines but
--   neither a row nor a problem, a format sniffed whose lines all went unread; 'unrecognised engine lines';
--   else NULL). Most unrecognised lines first.
with

files as (
    select * from ingest_files where not rotated
),

final as (
    select
        file,
        format,
        status,
        lines,
        lines_parsed as parsed,
        lines_skipped as skipped,
        lines_unrecognised as unrecognised,
        round(100.0 * lines_parsed / nullif(lines, 0), 1) as parsed_pct,
        round(100.0 * lines_skipped / nullif(lines, 0), 1) as skipped_pct,
        round(100.0 * lines_unrecognised / nullif(lines, 0), 1) as unrecognised_pct,
        case
            when status = 'read' and rows = 0 and errors = 0 and lines > 0 then 'no rows from its lines'
            when lines_unrecognised > 0 and source_kind = 'engine' then 'unrecognised engine lines'
        end as flag
    from files
)

select * from final
order by unrecognised desc nulls last, file
