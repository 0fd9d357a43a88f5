-- Question: when was the newest engine step line or API access line of a store that holds no requests (the
--   anchor of a relative --since/--until when the engines logged no request lines: vLLM's default since 0.10)?
-- Grain: one row.
-- Parameters: none.
-- Columns: t (the latest such line's time, not in the future; the latest of all when every one is, as in
--   window_newest_request).
with

lines as (
    select ts as t from engine_steps
    union all
    select ts as t from access_log
),

final as (
    select coalesce(max(t) filter (where t <= current_timestamp), max(t)) as t
    from lines
)

select * from final
