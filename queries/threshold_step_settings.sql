-- Question: which step-scoped features does each engine start evaluate, against which threshold?
-- Grain: one row per (engine start, step-scoped feature it evaluates) of thr_settings.
-- Parameters: none. Reads thr_settings (registered by the caller: attribution.thresholds.crossings.register).
-- Columns: feature, quantity, op, threshold, config_hash (hash() of the config_id, as
--   queries/threshold_step_rows.sql gives it for each line). Ordered by feature.
with

final as (
    select feature, quantity, op, threshold, hash(config_id) as config_hash
    from thr_settings
    where evaluate and scope = 'step'
)

select * from final
order by feature
