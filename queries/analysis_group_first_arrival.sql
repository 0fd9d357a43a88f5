-- Question: when did each group of the selection first see a request (to order cohorts in time)?
-- Grain: one row per group (grp) of int_analysis_requests in the window.
-- Parameters: none.
-- Columns: grp, t (first t_arrival, microseconds since the epoch).
with

requests as (
    select * from int_analysis_requests where in_window
),

final as (
    select grp, min(t_arrival) as t
    from requests
    group by grp
)

select * from final
