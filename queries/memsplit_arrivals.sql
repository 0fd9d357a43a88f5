-- Question: which requests arrived at one deployment during one engine start, with the lengths a replay
--   through the simulator needs?
-- Grain: one row per request of joined_requests at $deployment arriving in [$since, $until) that completed
--   (status not error / failed / aborted) and has prompt and output token counts.
-- Parameters: $deployment (VARCHAR), $since, $until (TIMESTAMPTZ; NULL leaves that end open).
-- Columns: arrival, request_key, prompt_tokens, output_tokens, cached_tokens (NULL when the source does not
--   say), max_tokens, workload, queue_s, ttft_s (as measured, for comparison with the replay); ordered by
--   arrival, then request_key, so that requests arriving in the same second replay in a fixed order.
with

requests as (
    select * from joined_requests
    where deployment = $deployment
      and arrival is not null
      and ($since::timestamptz is null or arrival >= $since::timestamptz)
      and ($until::timestamptz is null or arrival < $until::timestamptz)
),

final as (
    select
        arrival,
        request_key,
        prompt_tokens,
        output_tokens,
        cached_tokens,
        max_tokens,
        workload,
        queue_s,
        ttft_s
    from requests
    where coalesce(status, 'ok') not in ('error', 'failed', 'aborted')
      and prompt_tokens is not null
      and output_tokens is not null
)

select * from final
order by arrival, request_key
