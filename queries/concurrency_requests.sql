-- Question: which requests have an interval the concurrency sweep of [$since, $until) reads?
-- Grain: one row per int_analysis_requests row with an arrival, an end after it and an interval touching the window.
-- Parameters: $since, $until (TIMESTAMPTZ, NULL = open).
-- Columns: deployment, grp, t_arrival, t_admit, t_first, t_end (microseconds since the epoch), prompt_tokens,
--   output_tokens. attribution.analyses.sweep builds the step functions from them.
with

final as (
    select deployment, grp, t_arrival, t_admit, t_first, t_end, prompt_tokens, output_tokens
    from int_analysis_requests
    where t_arrival is not null and t_end > t_arrival
      and ($since::timestamptz is null or t_end > epoch_us($since::timestamptz))
      and ($until::timestamptz is null or t_arrival < epoch_us($until::timestamptz))
)

select * from final
