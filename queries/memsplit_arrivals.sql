-- Question: which requests arrived at each engine start's deployment during its period, with the lengths a
--   replay through the simulator needs?
-- Grain: one row per (start of the temporary table int_memsplit_periods, request of joined_requests at the
--   start's deployment arriving in [period_since, period_until)) that completed (status not error / failed /
--   aborted) and has prompt and output token counts. One query for every start (on Spark each query has a
--   fixed cost), split by start_id in attribution.memsplit.assemble.
-- Parameters: none (the starts and their periods are int_memsplit_periods'; NULL leaves that end open).
-- Columns: start_id, arrival, request_key, prompt_tokens, output_tokens, cached_tokens (NULL when the source
--   does not say), max_tokens, workload, queue_s, ttft_s (as measured, for comparison with the replay);
--   ordered by start_id, arrival, then request_key, so that requests arriving in the same second replay in a
--   fixed order.
with

requests as (
    select p.start_id, r.*
    from int_memsplit_periods as p
    join joined_requests as r
      on r.deployment = p.deployment
     and r.arrival is not null
     and (p.period_since is null or r.arrival >= p.period_since)
     and (p.period_until is null or r.arrival < p.period_until)
),

final as (
    select
        start_id,
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
order by start_id, arrival, request_key
