-- Question: which periods of engine starts does a dashboard filter set's engine version narrowing keep?
-- Grain: one row per kept start: a deployment's start of a kept version, until the deployment's next start.
-- Parameters: none. Reads version_periods (deployment, started, ended: the filter set's own table, which
--   attribution.dashboard.create_narrowed makes under the set's schema, first on the cursor's search path).
-- Columns: deployment, started (microseconds since the epoch), ended (microseconds since the epoch; NULL where
--   the start is the deployment's latest: open). What attribution.thresholds.steps.share_step_rows is told to
--   cut a version narrowing's step rows from the commit's every line.
with

final as (
    select
        deployment,
        epoch_us(started) as started,
        case when ended = 'infinity'::timestamptz then null else epoch_us(ended) end as ended
    from version_periods
)

select * from final
