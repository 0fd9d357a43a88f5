-- Question: when did the newest request of the store arrive (the anchor of a relative --since/--until)?
-- Grain: one row.
-- Parameters: none.
-- Columns: t (the latest arrival, else finish time, not in the future; the latest of all when every one is:
--   a row later than now, admitted up to the ingest's max_future, would shrink `--since 7d` to the hours
--   after it).
with

requests as (
    select coalesce(arrival, finished) as t from joined_requests
),

final as (
    select coalesce(max(t) filter (where t <= current_timestamp), max(t)) as t
    from requests
)

select * from final
