-- Question: which engine starts (or default settings) served the requests of the window?
-- Grain: one row per config_id of thr_requests.
-- Parameters: none (reads thr_requests).
-- Columns: config_id, requests.
with

requests as (
    select * from thr_requests
),

final as (
    select config_id, count(*) as requests from requests group by config_id
)

select * from final
order by config_id
