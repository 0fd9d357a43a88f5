-- Question: when did each request of the window arrive, on which deployment (for the step features it met)?
-- Grain: one row per thr_requests row with an arrival and a deployment.
-- Parameters: none. Reads thr_requests (queries/threshold_requests.sql, materialised by the caller).
-- Columns: rid, deployment, t (arrival in microseconds since the epoch). attribution.thresholds.steps finds the
--   step line each one met (steps.ARRIVAL_TIE_RULE).
with

final as (
    select rid, deployment, epoch_us(arrival) as t
    from thr_requests
    where arrival is not null and deployment is not null
)

select * from final
