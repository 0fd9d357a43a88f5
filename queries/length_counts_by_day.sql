-- Question: how many requests of each day had each prompt, output and cached length, in each group any `by`
--   can ask for (the per-day summary the dashboard's first look merges, summaries/days.py)?
-- Grain: one row per (day, workload, model, deployment, label, engine, engine_version, metric, length) with at
--   least one request, for the days in $days; the rows int_request_length_counts.sql gives, by day; and per
--   group of a day one row of metric `requests` (length 0, n = the group's requests, lengths known or not:
--   a filtered page's request count, analysis_requests_in_window.sql's, summed over the days it keeps).
-- Parameters: $days (VARCHAR[]: days as length_counts_day_digest.sql names them).
-- Columns: day, workload, model, deployment, label, engine, engine_version, metric (prompt_tokens,
--   output_tokens, cached_tokens or requests), length, n (requests).
with

requests as (
    select
        coalesce(strftime(timezone('UTC', coalesce(arrival, finished)), '%Y-%m-%d'), 'none') as day,
        workload, model, deployment, label, engine, engine_version, prompt_tokens, output_tokens, cached_tokens
    from joined_requests
),

chosen as (
    select * from requests where day in (select unnest($days::varchar[]))
),

long as (
    unpivot chosen
    on prompt_tokens, output_tokens, cached_tokens
    into name metric value length
),

final as (
    select day, workload, model, deployment, label, engine, engine_version, metric, length, count(*) as n
    from long
    group by all
    union all
    select day, workload, model, deployment, label, engine, engine_version, 'requests', 0, count(*)
    from chosen
    group by all
)

select * from final
