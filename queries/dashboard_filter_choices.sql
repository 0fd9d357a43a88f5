-- Question: which values can the dashboard's filters offer, and what time span do the requests cover?
-- Grain: one row per (deployment, workload, label, version) value combination of joined_requests.
-- Parameters: none.
-- Columns: deployment, workload, label, version (each filter dimension's value as `select(by=...)` groups a
--   request, queries/int_analysis_requests.sql; '(none)' where the source does not say; the same expressions as
--   attribution.dashboard's filters), requests, first and last (arrival, else finish time).
with

requests as (
    select * from joined_requests
),

final as (
    select
        coalesce(deployment, '(none)') as deployment,
        coalesce(workload, '(none)') as workload,
        coalesce(label, '(none)') as label,
        coalesce(nullif(concat_ws(' ', engine, engine_version), ''), '(none)') as version,
        count(*) as requests,
        min(coalesce(arrival, finished)) as first,
        max(coalesce(arrival, finished)) as last
    from requests
    group by all
)

select * from final
