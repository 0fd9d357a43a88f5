-- Question: how did running and waiting requests and live KV tokens move over time on deployments whose
--   figures come from the engine's own step lines (for charts)?
-- Grain: one row per (deployment, time bucket of $bucket_us microseconds) holding at least one step line. An
--   engine with several data-parallel ranks (engine_index > 0) is reported per rank as `deployment #rank`.
-- Parameters: $bucket_us (BIGINT, bucket width in microseconds; buckets start at multiples of it since the
--   epoch). Reads the temporary table int_concurrency_step_lines (queries/int_concurrency_step_lines.sql).
-- Columns: the columns of the exact time series (attribution.analyses.sweep.timeseries): deployment, ts
--   (bucket start, TIMESTAMPTZ), running_max, waiting_max, in_system_max, in_system_mean (the lines weighted by their `dur`; a line counts in the bucket it
--   was printed in), kv_tokens_max, covered_s (the lines' weights). These are samples: a peak between two lines
--   is missed.
with

final as (
    select
        deployment,
        to_timestamp(bucket * $bucket_us / 1e6) as ts,
        max(running)::bigint as running_max,
        max(waiting)::bigint as waiting_max,
        max(in_system)::bigint as in_system_max,
        coalesce(sum(in_system * dur) / nullif(sum(dur), 0), avg(in_system)) as in_system_mean,
        max(kv_tokens) as kv_tokens_max,
        sum(dur) / 1e6 as covered_s
    from (select *, epoch_us(ts) // $bucket_us as bucket from int_concurrency_step_lines)
    group by deployment, bucket
)

select * from final
order by deployment, ts
