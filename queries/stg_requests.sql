-- Question: one row per request per source, with the engine's request events folded in.
-- Grain: one row per (source, deployment, request_key) row of raw_requests.
-- Parameters: none.
-- Columns: the `requests` columns of DESIGN.md. vLLM writes a request over several lines: `Received request`
--   (the row: arrival, prompt and max tokens) and `Added`/`Finished`/`Aborted` (events). `finished` takes the
--   Finished line's time when the row has none; `status` becomes `aborted` when an Aborted line names it, and
--   `arrival` takes a `received` event's time when the row has none (SGLang `Receive:` lines).
with

raw as (
    select * from raw_requests
),

events as (
    select
        source,
        deployment,
        request_key,
        min(ts) filter (where event = 'received') as received_ts,
        max(ts) filter (where event = 'finished') as finished_ts,
        max(ts) filter (where event = 'aborted') as aborted_ts
    from raw_request_events
    group by all
),

final as (
    select
        raw.* replace (
            coalesce(raw.arrival, events.received_ts) as arrival,
            coalesce(raw.finished, events.finished_ts, events.aborted_ts) as finished,
            case when events.aborted_ts is not null then 'aborted' else raw.status end as status
        )
    from raw
    left join events using (source, deployment, request_key)
)

select * from final
