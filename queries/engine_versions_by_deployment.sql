-- Question: which engine, version and model did each deployment start, and how many times?
-- Grain: one row per (deployment, engine, version, model) of engine_config.
-- Parameters: none.
-- Columns: deployment, engine, version, model, starts.
with

configs as (
    select * from engine_config
),

final as (
    select deployment, engine, version, model, count(*) as starts
    from configs
    group by all
)

select * from final
order by 1, 3
