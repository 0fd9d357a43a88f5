-- Question: which engine starts does a memory-split analysis look at, and over which period of each?
-- Grain: one row per engine start (engine_config row) whose period touches the window [$since, $until).
-- Parameters: $engine (VARCHAR or NULL: only starts of this engine), $deployments (VARCHAR[] or NULL: only
--   these deployments), $since, $until (TIMESTAMPTZ or NULL: open ends).
-- Columns: start_id (1, 2, ... by deployment and time), the engine_config row, next_ts (the deployment's next
--   start), period_since, period_until (the start's period cut to the window: from the start, or $since, to
--   the deployment's next start, or $until; NULL = open).
-- Read by int_memsplit_step_lines, int_memsplit_starts and memsplit_arrivals.
with

config as (
    select
        *,
        lead(ts) over (partition by deployment order by ts, file, start_line) as next_ts
    from engine_config
    where deployment is not null
      and ($engine::varchar is null or engine = $engine::varchar)
      and ($deployments::varchar[] is null or list_contains($deployments::varchar[], deployment))
),

windowed as (
    select
        *,
        greatest(ts, coalesce($since::timestamptz, ts)) as period_since,
        case
            when next_ts is null then $until::timestamptz
            when $until::timestamptz is null then next_ts
            else least(next_ts, $until::timestamptz)
        end as period_until
    from config
    where ($until::timestamptz is null or ts < $until::timestamptz)
      and ($since::timestamptz is null or next_ts is null or next_ts > $since::timestamptz)
),

final as (
    select row_number() over (order by deployment, ts, file, start_line) as start_id, *
    from windowed
)

select * from final
