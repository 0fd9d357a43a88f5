-- Question: how many request rows did each deployment's engine logs give in the window (to set beside the
--   calls its API server answered: queries/engine_responses.sql)?
-- Grain: one row per deployment with engine request rows in the window.
-- Parameters: $since, $until (TIMESTAMPTZ; NULL leaves that end open). A row's time: its arrival, else its end.
-- Columns: deployment, requests.
select deployment, count(*) as requests
from requests
where source_kind = 'engine'
    and coalesce(arrival, finished) is not null
    and ($since::timestamptz is null or coalesce(arrival, finished) >= $since::timestamptz)
    and ($until::timestamptz is null or coalesce(arrival, finished) < $until::timestamptz)
group by deployment
order by deployment
