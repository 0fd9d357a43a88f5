-- Question: how long a time do the step lines of these deployments span (to pick a time-series bucket)?
-- Grain: one row.
-- Parameters: $since, $until (TIMESTAMPTZ or NULL), $deployments (VARCHAR[]).
-- Columns: span_s (seconds from the first to the last line of the longest-running deployment; 0 when none).
with

spans as (
    select epoch(max(ts) - min(ts)) as span_s
    from engine_steps
    where running is not null
      and list_contains($deployments::varchar[], deployment)
      and ($since::timestamptz is null or ts >= $since::timestamptz)
      and ($until::timestamptz is null or ts < $until::timestamptz)
    group by deployment
),

final as (
    select coalesce(max(span_s), 0)::double as span_s from spans
)

select * from final
