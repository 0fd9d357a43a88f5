-- Question: which requests crossed each feature of a comparison (over its threshold, or arrived while the deployment was)?
-- Grain: one row per (request, feature) that crossed.
-- Parameters: none (reads int_threshold_request_flags and thr_arrival_flags).
-- Columns: rid, feature, estimated (the quantity was an estimate: uncached tokens with cached unknown, or the
--   engine state at arrival for step-scoped features).
with

request_flags as (
    select rid, feature, estimated from int_threshold_request_flags where crossed
),

arrival_flags as (
    select rid, feature, estimated from thr_arrival_flags where crossed
),

final as (
    select * from request_flags
    union all
    select * from arrival_flags
)

select * from final
