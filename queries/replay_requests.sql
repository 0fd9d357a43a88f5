-- Question: which requests does a replay export send, in which order, with the lengths and prefix blocks a
--   load generator needs?
-- Grain: one row per request of joined_requests with an arrival in [$since, $until) and a prompt length.
-- Parameters: $since, $until (TIMESTAMPTZ; NULL leaves that end open).
-- Columns: arrival, t_us (microseconds since the epoch), workload, deployment, model, "user" (the key's
--   user id from the gateway: the session key of --sessions user), prompt_tokens, output_tokens
--   (NULL when the source does not say), block_hashes (NULL where the source has none); ordered by arrival,
--   then file and line, so that requests arriving at the same instant keep the order their source wrote them.
with

requests as (
    select * from joined_requests
    where arrival is not null
      and prompt_tokens is not null
      and ($since::timestamptz is null or arrival >= $since::timestamptz)
      and ($until::timestamptz is null or arrival < $until::timestamptz)
),

final as (
    select
        arrival,
        epoch_us(arrival) as t_us,
        coalesce(workload, '(none)') as workload,
        coalesce(deployment, '(none)') as deployment,
        model,
        "user",
        prompt_tokens,
        output_tokens,
        block_hashes
    from requests
    order by arrival, file, line
)

select * from final
