-- Question: which engine starts (or default settings) served the requests of the window?
-- Grain: one row per config_id of int_threshold_requests.
-- Parameters: none (reads int_threshold_requests).
-- Columns: config_id, requests.
with

requests as (
    select * from int_threshold_requests
),

final as (
    select config_id, count(*) as requests from requests group by config_id
)

select * from final
order by config_id
