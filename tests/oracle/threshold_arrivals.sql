-- Question: which requests arrived while their deployment was over a step-scoped feature's threshold?
-- Grain: one row per (request of int_threshold_requests, step-scoped feature with rows on the request's deployment).
-- Parameters: $max_gap_s (DOUBLE: the latest step row before the arrival counts only if it is at most this
--   old). Reads int_threshold_requests and thr_step_values.
-- Columns: rid, feature, value (the quantity on the step row the request met: the latest of its deployment
--   at or before the arrival, ties as attribution.thresholds.steps.ARRIVAL_TIE_RULE), crossed (that row was
--   over the threshold and recent enough), estimated (always true: the engine state at arrival stands in for
--   the state the request met).
-- Oracle: a test reference for attribution.thresholds.steps.arrival_flags (the product path), which tests
--   compare with it; the product never runs this file.
with

requests as (
    select rid, deployment, arrival from int_threshold_requests where arrival is not null
),

features as (
    select distinct feature, deployment from thr_step_values
),

-- the line a request met is the one of attribution.thresholds.steps.ARRIVAL_TIE_RULE: among lines of one
-- deployment logged at the same instant, the last file (by name), then its last line; keeping only that line
-- of each instant leaves the ASOF join no tie to break
lines as (
    select feature, deployment, ts, value, crossed
    from thr_step_values
    qualify row_number() over (partition by feature, deployment, ts order by file desc, line desc) = 1
),

pairs as (
    select r.rid, r.deployment, r.arrival, f.feature
    from requests as r
    join features as f using (deployment)
),

matched as (
    select p.rid, p.feature, v.value, v.crossed, epoch(p.arrival) - epoch(v.ts) as age_s
    from pairs as p
    asof left join lines as v
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
