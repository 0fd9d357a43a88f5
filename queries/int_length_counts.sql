-- Question: how many requests had each prompt, output and cached length per group, from the per-day counts?
-- Grain: one row per (grp, metric, length), summed over the days' files of length_counts_by_day.sql; the same
--   rows as counting int_request_lengths.sql with no window (the grp expression is int_analysis_requests.sql's).
-- Parameters: $files (VARCHAR[]: Parquet files of length_counts_by_day rows), $by (as int_analysis_requests).
-- Columns: grp, metric, length, n.
with

days as (
    select * from read_parquet($files::varchar[])
),

grouped as (
    select
        coalesce(
            case $by
                when 'workload' then workload
                when 'model' then model
                when 'deployment' then deployment
                when 'label' then label
                when 'day' then case when day <> 'none' then day end
                when 'version' then version_label(engine, engine_version)
                else 'all'
            end,
            '(none)'
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
