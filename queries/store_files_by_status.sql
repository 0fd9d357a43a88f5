-- Question: how many of the store's current files are in each ingest status, and how large are they?
-- Grain: one row per status of ingest_files (rotated files left out).
-- Parameters: none.
-- Columns: status, files, bytes (sum of size_bytes).
with

files as (
    select * from ingest_files where not rotated
),

final as (
    select status, count(*) as files, sum(size_bytes) as bytes
    from files
    group by status
)

select * from final
order by status
