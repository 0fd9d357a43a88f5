-- Question: how many requests arrived per minute over time, per group (the per-minute rate, in buckets of whole
--   minutes for a long window)?
-- Grain: one row per (group, bucket of $bucket_minutes clock minutes, aligned to the epoch) between the group's
--   first and last arrival, from int_arrival_minutes (empty minutes included as 0).
-- Parameters: $bucket_minutes (INTEGER >= 1).
-- Columns: grp, ts (start of the bucket, TIMESTAMPTZ), minutes (minutes of the span in the bucket), rpm_mean
--   (requests per minute over those minutes), rpm_max (the busiest minute's requests).
with

minutes as (
    select * from int_arrival_minutes
),

buckets as (
    select grp, m // $bucket_minutes::bigint as b, count(*) as minutes, avg(requests) as rpm_mean,
        max(requests) as rpm_max
    from minutes
    group by grp, b
),

final as (
    select grp, to_timestamp(b * $bucket_minutes::bigint * 60) as ts, minutes, rpm_mean, rpm_max
    from buckets
)

select * from final
order by grp = '(all)', grp = '(none)', grp, ts
