-- Question: when did each request of the window arrive, in its group and overall, and how long after the one before?
-- Grain: one row per request of int_analysis_requests that arrived in the window, per group it belongs to: its
--   group under $by, and with $overall also the group '(all)'.
-- Parameters: $overall (BOOLEAN: add the '(all)' rows).
-- Columns: grp, t (arrival, microseconds since the epoch), gap_s (seconds since the group's previous arrival in
--   time order; 0 for requests arriving at the same microsecond, NULL for the group's first request).
with

requests as (
    select grp, t_arrival from int_analysis_requests where in_window and t_arrival is not null
),

grouped as (
    select grp, t_arrival as t from requests
    union all
    select '(all)' as grp, t_arrival as t from requests where $overall::boolean
),

final as (
    select grp, t, (t - lag(t) over (partition by grp order by t)) / 1e6 as gap_s
    from grouped
)

select * from final
