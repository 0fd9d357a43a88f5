-- Question: how many requests of the window can a replay export not send (no arrival time or no prompt length)?
-- Grain: one row.
-- Parameters: $since, $until (TIMESTAMPTZ; NULL leaves that end open).
-- Columns: no_arrival (requests without an arrival time; with a window bound they cannot be placed in it and
--   are counted only when the window is open), no_prompt (arrival in the window but no prompt token count).
with

requests as (
    select arrival, prompt_tokens from joined_requests
),

final as (
    select
        count(*) filter (where arrival is null and $since::timestamptz is null
                         and $until::timestamptz is null) as no_arrival,
        count(*) filter (where arrival is not null and prompt_tokens is null
                         and ($since::timestamptz is null or arrival >= $since::timestamptz)
                         and ($until::timestamptz is null or arrival < $until::timestamptz)) as no_prompt
    from requests
)

select * from final
