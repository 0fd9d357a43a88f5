-- Question: which labels or engine versions could a comparison use as its cohorts?
-- Grain: one row per label, or per engine version, of the completed requests in int_threshold_requests.
-- Parameters: $cohort_by ('label' or 'version').
-- Columns: value (the label, or `engine version`), requests, first_arrival, last_arrival; ordered by
--   first_arrival, so the older cohort comes first.
with

requests as (
    select * from int_threshold_requests where ok
),

valued as (
    select
        case $cohort_by when 'label' then label
                        else version_label(engine, engine_version) end as value,
        arrival
    from requests
),

final as (
    select value, count(*) as requests, min(arrival) as first_arrival, max(arrival) as last_arrival
    from valued
    where value is not null
    group by value
)

select * from final
order by first_arrival, value
