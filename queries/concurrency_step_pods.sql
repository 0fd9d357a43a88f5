-- Question: which engines print step lines with a running count in the window, under the name
--   int_concurrency_step_lines gives their lines, and over what span?
-- Grain: one row per (deployment, name) with such lines in the window [$since, $until): name is the deployment,
--   or `deployment #rank` for a data-parallel rank (engine_index > 0), as int_concurrency_step_lines names it.
-- Parameters: $since, $until (TIMESTAMPTZ or NULL).
-- Columns: deployment (as stored), name, lines, span_s (seconds from the first line to the last, as
--   concurrency_steps_span measures each name's lines).
-- Read by attribution.analyses.concurrency to answer the step-line stats of any set of deployments from those of
--   every deployment of the window (kept per store commit).
with

final as (
    select
        deployment,
        deployment || case when coalesce(engine_index, 0) > 0 then ' #' || engine_index else '' end as name,
        count(*) as lines,
        epoch(max(ts) - min(ts)) as span_s
    from engine_steps
    where running is not null
      and deployment is not null
      and ($since::timestamptz is null or ts >= $since::timestamptz)
      and ($until::timestamptz is null or ts < $until::timestamptz)
    group by all
)

select * from final
order by deployment, name
