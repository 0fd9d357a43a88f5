-- Question: how many requests had each prompt, output and cached length per group, from the per-day counts?
-- Grain: one row per (grp, metric, length), summed over the days' files of length_counts_by_day.sql, of the
--   days in [$since_day, $until_day) and the requests the dashboard's filters keep; the rows of
--   int_request_length_counts.sql on a window of whole UTC days (the grp is int_analysis_requests.sql's,
--   group_label, the filter values attribution.dashboard's _REQUEST_VALUE), plus the `requests` rows (length 0).
-- Parameters: $files (VARCHAR[]: Parquet files of length_counts_by_day rows), $by (as int_analysis_requests),
--   $since_day, $until_day (VARCHAR 'YYYY-MM-DD' or NULL: an open end; with either end set the requests with
--   no time, day 'none', are out of the window), $deployments, $workloads, $labels, $versions (VARCHAR[];
--   empty: no restriction).
-- Columns: grp, metric, length, n.
with

days as (
    select * from read_parquet($files::varchar[])
    where ($since_day::varchar is null or day >= $since_day::varchar)
      and ($until_day::varchar is null or day < $until_day::varchar)
      and (($since_day::varchar is null and $until_day::varchar is null) or day <> 'none')
      and (len($deployments::varchar[]) = 0
           or list_contains($deployments::varchar[], coalesce(deployment, '(none)')))
      and (len($workloads::varchar[]) = 0
           or list_contains($workloads::varchar[], coalesce(workload, '(none)')))
      and (len($labels::varchar[]) = 0 or list_contains($labels::varchar[], coalesce(label, '(none)')))
      and (len($versions::varchar[]) = 0
           or list_contains($versions::varchar[], coalesce(version_label(engine, engine_version), '(none)')))
),

grouped as (
    select
        group_label(
            $by, workload, model, deployment, label, case when day <> 'none' then day end, engine, engine_version
        ) as grp,
        metric,
        length,
        n
    from days
),

final as (
    select grp, metric, length, sum(n)::bigint as n
    from grouped
    group by all
)

select * from final
