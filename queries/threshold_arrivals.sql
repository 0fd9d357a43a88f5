-- Question: which requests arrived while their deployment was over a step-scoped feature's threshold?
-- Grain: one row per (request of thr_requests, step-scoped feature with rows on the request's deployment).
-- Parameters: $max_gap_s (DOUBLE: the latest step row before the arrival counts only if it is at most this
--   old). Reads thr_requests and thr_step_values.
-- Columns: rid, feature, value (the quantity on the latest step row of the deployment at or before the
--   arrival), crossed (that row was over the threshold and recent enough), estimated (always true: the
--   engine state at arrival stands in for the state the request met).
with

requests as (
    select rid, deployment, arrival from thr_requests where arrival is not null
),

features as (
    select distinct feature, deployment from thr_step_values
),

pairs as (
    select r.rid, r.deployment, r.arrival, f.feature
    from requests as r
    join features as f using (deployment)
),

matched as (
    select p.rid, p.feature, v.value, v.crossed, epoch(p.arrival) - epoch(v.ts) as age_s
    from pairs as p
    asof left join thr_step_values as v
        on p.feature = v.feature and p.deployment = v.deployment and p.arrival >= v.ts
),

final as (
    select
        rid,
        feature,
        value,
        coalesce(crossed and age_s <= $max_gap_s, false) as crossed,
        true as estimated
    from matched
)

select * from final
