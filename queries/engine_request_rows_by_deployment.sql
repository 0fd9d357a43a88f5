-- Question: how many request rows did each deployment's engine logs give in the window (to set beside the
--   calls its API server answered: queries/engine_responses.sql)?
-- Grain: one row per deployment with engine request rows in the window.
-- Parameters: $since, $until (TIMESTAMPTZ; NULL leaves that end open). A row's time: its arrival, else its end.
-- Columns: deployment, requests.
with

engine_rows as (
    select deployment, coalesce(arrival, finished) as t
    from requests
    where source_kind = 'engine'
),

final as (
    select deployment, count(*) as requests
    from engine_rows
    where t is not null
        and ($since::timestamptz is null or t >= $since::timestamptz)
        and ($until::timestamptz is null or t < $until::timestamptz)
    group by deployment
    order by deployment
)

select * from final
