-- Question: what did the engines' API servers answer, per deployment, in the window: how many responses of
--   each status to each method and path (uvicorn access lines)? With vLLM's default logging (no request
--   lines since 0.10) these lines are the only record of each request the engine served, and requests refused
--   before the engine (400 too long, 401, 404) appear nowhere else.
-- Grain: one row per (deployment, method, path, http_status) with a response in the window.
-- Parameters: $since, $until (TIMESTAMPTZ; NULL leaves that end open). An access line's time is the nearest
--   earlier timestamped line of its file (uvicorn's access lines carry none).
-- Columns: deployment, method, path, http_status, responses, first_ts, last_ts.
with

responses as (
    select deployment, method, path, http_status, count(*) as responses, min(ts) as first_ts, max(ts) as last_ts
    from access_log
    where ($since::timestamptz is null or ts >= $since::timestamptz)
        and ($until::timestamptz is null or ts < $until::timestamptz)
    group by deployment, method, path, http_status
),

final as (
    select * from responses
    order by deployment, responses desc, http_status, method, path
)

select * from final
