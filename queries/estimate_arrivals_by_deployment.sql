-- Question: how many requests of the selection does each deployment have (the replayed arrivals of an
--   estimate)?
-- Grain: one row per deployment of int_analysis_requests.
-- Parameters: none.
-- Columns: deployment, n.
with

requests as (
    select * from int_analysis_requests
),

final as (
    select deployment, count(*) as n
    from requests
    group by 1
)

select * from final
