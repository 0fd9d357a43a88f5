-- Question: how did running, waiting and live KV tokens move over time on each deployment (for charts), from
--   the sweep's states?
-- Grain: one row per (deployment, time bucket of $bucket_us microseconds) that the deployment's sweep covers
--   with a state of non-zero length.
-- Parameters: $bucket_us (BIGINT, bucket width in microseconds; buckets start at multiples of it since the
--   epoch); reads the temporary table int_concurrency_sweep (queries/int_concurrency_sweep.sql).
-- Columns: the columns of attribution.analyses.sweep.timeseries: deployment, ts (bucket start), running_max,
--   waiting_max, in_system_max, in_system_mean (time-weighted over the part of the bucket the sweep covers),
--   kv_tokens_max, covered_s.
with

states as (
    select deployment, t, dur_us, running, waiting, in_system, greatest(kv_start, kv_end) as kv
    from int_concurrency_sweep
    where not by_group and dur_us > 0
),

spread as (
    -- a state spanning several buckets counts in each of them
    select *, unnest(generate_series(t // $bucket_us, (t + dur_us - 1) // $bucket_us)) as bucket
    from states
),

covered as (
    select *, least(t + dur_us, (bucket + 1) * $bucket_us) - greatest(t, bucket * $bucket_us) as overlap_us
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
        max(kv) as kv_tokens_max,
        sum(overlap_us) / 1e6 as covered_s
    from covered
    group by deployment, bucket
)

select * from final
order by deployment, ts
