-- Question: what time span and how many rows does the store hold per deployment and table?
-- Grain: one row per (deployment, table).
-- Parameters: none.
-- Columns: deployment, "table", engine, rows, first_ts, last_ts (UTC); requests use arrival (else finished).
with

reqs as (
    select deployment, 'requests' as "table", any_value(engine) as engine, count(*) as rows,
        min(coalesce(arrival, finished)) as first_ts, max(coalesce(finished, arrival)) as last_ts
    from requests
    group by deployment
),

steps as (
    select deployment, 'engine_steps' as "table", any_value(engine) as engine, count(*) as rows,
        min(ts) as first_ts, max(ts) as last_ts
    from engine_steps
    group by deployment
),

configs as (
    select deployment, 'engine_config' as "table", any_value(engine) as engine, count(*) as rows,
        min(ts) as first_ts, max(ts) as last_ts
    from engine_config
    group by deployment
),

final as (
    select * from reqs
    union all select * from steps
    union all select * from configs
)

select * from final
order by deployment, "table"
