-- Question: how did running, waiting and live KV tokens move over time on each deployment (for charts)?
-- Grain: one row per (deployment, time bucket of $bucket_us microseconds) that the deployment's sweep
--   covers.
-- Parameters: $bucket_us (BIGINT, bucket width in microseconds; buckets start at multiples of it since the
--   epoch).
-- Columns: deployment, ts (bucket start, TIMESTAMPTZ), running_max, waiting_max, in_system_max,
--   in_system_mean (time-weighted over the part of the bucket the sweep covers), kv_tokens_max, covered_s.
--   Read from concurrency_segments (grp NULL: every request of the deployment); running/waiting are 0 where
--   the split is unknown (attribution.analyses.concurrency reports them as NULL there).
-- Oracle: a test reference for attribution.analyses.sweep.timeseries (the product path), which tests compare
--   with it; the product never runs this file.
with

segments as (
    select * from concurrency_segments where grp is null and dur_us > 0
),

spread as (
    -- a state spanning several buckets counts in each of them
    select *, unnest(range(t // $bucket_us, (t + dur_us - 1) // $bucket_us + 1)) as bucket
    from segments
),

covered as (
    select
        *,
        least(t + dur_us, (bucket + 1) * $bucket_us) - greatest(t, bucket * $bucket_us) as overlap_us
    from spread
),

final as (
    select
        deployment,
        to_timestamp(bucket * $bucket_us / 1e6) as ts,
        max(running) as running_max,
        max(waiting) as waiting_max,
        max(in_system) as in_system_max,
        sum(in_system * overlap_us) / sum(overlap_us) as in_system_mean,
        max(greatest(kv_start, kv_end)) as kv_tokens_max,
        sum(overlap_us) / 1e6 as covered_s
    from covered
    group by deployment, bucket
)

select * from final
order by deployment, ts
