-- Question: at which instant did each registered engine start begin, and what is its config hash?
-- Grain: one row per thr_starts row.
-- Parameters: none. Reads thr_starts (registered by the caller: config_id, deployment, engine, ts).
-- Columns: deployment, started (microseconds since the epoch), config_hash (hash() of the config_id, as
--   threshold_step_rows.sql's config_hash): attribution.thresholds.steps checks that the lines of a version
--   narrowing's period were each assigned that period's own start before cutting them from every line's rows.
with

final as (
    select deployment, epoch_us(ts) as started, hash(config_id) as config_hash
    from thr_starts
)

select * from final
