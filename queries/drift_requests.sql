-- Question: which requests of the window does the drift check compare with the window before, with their lengths?
-- Grain: one row per request of int_analysis_requests inside the window, in arrival order (ties: file, line).
-- Parameters: none (reads int_analysis_requests, prepared by attribution.analyses for the window and grouping).
-- Columns: grp (the request's group), arrival, prompt_tokens, output_tokens (NULL where the source does not
--   say), first_store_arrival (the first arrival of any request in the store: where the data begins).
with

requests as (
    select grp, arrival, prompt_tokens, output_tokens, file, line from int_analysis_requests where in_window
),

first_seen as (
    select min(arrival) as first_store_arrival from joined_requests
),

final as (
    -- in arrival order, ties in file order: the drift's blocks of consecutive arrivals rank them, so the
    -- answer does not depend on the order the join returned its rows in
    select requests.* exclude (file, line), first_seen.first_store_arrival
    from requests cross join first_seen
    order by requests.arrival, requests.file, requests.line
)

select * from final
