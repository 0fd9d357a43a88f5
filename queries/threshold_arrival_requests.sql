-- Question: when did each request of the window arrive, on which deployment (for the step features it met)?
-- Grain: one row per int_threshold_requests row with an arrival and a deployment.
-- Parameters: none. Reads int_threshold_requests (queries/int_threshold_requests.sql, materialised by the caller).
-- Columns: rid, deployment, t (arrival in microseconds since the epoch). attribution.thresholds.steps finds the
--   step line each one met (steps.ARRIVAL_TIE_RULE).
with

final as (
    select rid, deployment, epoch_us(arrival) as t
    from int_threshold_requests
    where arrival is not null and deployment is not null
)

select * from final
