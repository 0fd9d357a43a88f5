-- Question: which requests of the window carry prefix-block hashes, in arrival order?
-- Grain: one row per request of joined_requests with a non-empty block_hashes list, arrival in [$since, $until).
-- Parameters: $since, $until (TIMESTAMPTZ; NULL leaves that end open); $workload, $deployment (VARCHAR;
--   NULL: all).
-- Columns: arrival, workload ('(none)' where unknown), deployment ('(none)' where unknown), prompt_tokens
--   (0 where unknown), block_hashes; ordered by arrival, then file and line (the trace's own order on ties).
with

blocks as (
    select
        arrival, coalesce(workload, '(none)') as workload, coalesce(deployment, '(none)') as deployment,
        coalesce(prompt_tokens, 0) as prompt_tokens, block_hashes, file, line
    from joined_requests
    where len(block_hashes) > 0 and arrival is not null
),

final as (
    select arrival, workload, deployment, prompt_tokens, block_hashes
    from blocks
    where ($since::timestamptz is null or arrival >= $since::timestamptz)
      and ($until::timestamptz is null or arrival < $until::timestamptz)
      and ($workload::varchar is null or workload = $workload::varchar)
      and ($deployment::varchar is null or deployment = $deployment::varchar)
    order by arrival, file, line
)

select * from final
