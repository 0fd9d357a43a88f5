-- Question: how many requests of the selection arrived inside its window?
-- Grain: one row.
-- Parameters: none.
-- Columns: n.
with

requests as (
    select * from int_analysis_requests
),

final as (
    select count(*) filter (where in_window) as n
    from requests
)

select * from final
