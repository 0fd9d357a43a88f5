-- Question: how many of each deployment's busy engine step lines printed each running count?
-- Grain: one row per (deployment, running) over the step lines in the window [$since, $until) with a request
--   running or waiting.
-- Parameters: $since, $until (TIMESTAMPTZ or NULL).
-- Columns: deployment, running, lines (step lines with that running count and running + waiting > 0).
with

busy as (
    select deployment, running
    from engine_steps
    where running is not null
      and running + coalesce(waiting, 0) > 0
      and ($since::timestamptz is null or ts >= $since::timestamptz)
      and ($until::timestamptz is null or ts < $until::timestamptz)
),

final as (
    select deployment, running, count(*) as lines
    from busy
    group by deployment, running
)

select * from final
order by deployment, running
