-- Question: when did each completed request of the window end, per pod (and group)?
-- Grain: one row per request of int_analysis_requests in the window, not failed, with a known end after its
--   arrival.
-- Parameters: $per_group (BOOLEAN: keep each request's group, else grp is NULL).
-- Columns: deployment, grp, t_end (microseconds since the epoch).
with

requests as (
    select * from int_analysis_requests
),

final as (
    select deployment, case when $per_group then grp end as grp, t_end
    from requests
    where in_window and ok and t_end is not null and t_end > t_arrival
)

select * from final
