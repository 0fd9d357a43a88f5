-- Question: one row per request per source, with the engine's request events folded in.
-- Grain: one row per (source, deployment, request_key) row of raw_requests.
-- Parameters: none.
-- Columns: the `requests` columns of DESIGN.md. vLLM writes a request over several lines: `Received request`
--   (the row: arrival, prompt and max tokens) and `Added`/`Finished`/`Aborted` (events). `finished` takes the
--   Finished line's time when the row has none; `status` becomes `aborted` when an Aborted line names it, and
--   `arrival` takes a `received` event's time when the row has none (SGLang `Receive:` lines).
-- Engine: the `-- @spark` blocks are kept for cost, not portability: both inputs distributed by request_key
--   alone (attribution.spark.connection lets a join reuse a partitioning on some of its keys), so the join
--   of the events here, and stg_joined_requests.sql's ranking per key and join of the engine and gateway
--   sides, need no other shuffle of the requests: one each side, where the DuckDB text's plan has three.
with

raw as (
    select * from raw_requests
-- @spark
    distribute by request_key
-- @end
),

events as (
    select
        source,
        deployment,
        request_key,
        min(ts) filter (where event = 'received') as received_ts,
        max(ts) filter (where event = 'finished') as finished_ts,
        max(ts) filter (where event = 'aborted') as aborted_ts
-- @duckdb
    from raw_request_events
-- @spark
    from (select * from raw_request_events distribute by request_key)
-- @end
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
