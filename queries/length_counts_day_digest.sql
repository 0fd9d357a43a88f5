-- Question: which days' requests changed since a length count was kept for them (summaries/days.py)?
-- Grain: one row per UTC day of coalesce(arrival, finished) of joined_requests ('none' where both are NULL):
--   the day int_analysis_requests groups `by day` with.
-- Parameters: none.
-- Columns: day, requests (rows of that day), h_sum, h_xor (sum and xor of a hash of each row's columns that the
--   lengths read: the groups and the three lengths; a changed, added or removed row changes them).
with

requests as (
    select
        coalesce(strftime(timezone('UTC', coalesce(arrival, finished)), '%Y-%m-%d'), 'none') as day,
        hash(workload, model, deployment, label, engine, engine_version, prompt_tokens, output_tokens,
             cached_tokens) as h
    from joined_requests
),

final as (
    select day, count(*) as requests, sum(h::hugeint) as h_sum, bit_xor(h) as h_xor
    from requests
    group by day
)

select * from final
order by day
