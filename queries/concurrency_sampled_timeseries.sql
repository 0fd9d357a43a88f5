-- Question: how did running and waiting requests and live KV tokens move over time on deployments whose
--   figures come from the engine's own step lines (for charts)?
-- Grain: one row per (deployment, time bucket of $bucket_us microseconds) holding at least one step line. An
--   engine with several data-parallel ranks (engine_index > 0) is reported per rank as `deployment #rank`.
-- Parameters: $since, $until (TIMESTAMPTZ or NULL), $deployments (VARCHAR[]), $bucket_us (BIGINT, bucket width
--   in microseconds; buckets start at multiples of it since the epoch), $max_gap_s (DOUBLE: a line stands for
--   at most this long; engines print nothing while idle).
-- Columns: the columns of concurrency_timeseries: deployment, ts (bucket start, TIMESTAMPTZ), running_max,
--   waiting_max, in_system_max (running + waiting), in_system_mean (lines weighted by the time to the next line
--   of their engine, capped at $max_gap_s, as in concurrency_sampled; a line counts in the bucket it was
--   printed in), kv_tokens_max (the line's KV tokens, else its KV usage times the engine's KV pool),
--   covered_s (the lines' weights). These are samples: a peak between two lines is missed.
with

pools as (
    select deployment, arg_max(kv_pool_tokens, ts) filter (where kv_pool_tokens is not null) as pool
    from engine_config
    group by deployment
),

steps as (
    select
        s.deployment || case when coalesce(s.engine_index, 0) > 0 then ' #' || s.engine_index else '' end
            as deployment,
        s.ts,
        s.running,
        s.waiting,
        s.running + coalesce(s.waiting, 0) as in_system,
        coalesce(s.kv_tokens::double, s.kv_usage * p.pool) as kv_tokens,
        s.file as src_file,
        s.line as src_line
    from engine_steps as s
    left join pools as p on p.deployment = s.deployment
    where s.running is not null
      and list_contains($deployments::varchar[], s.deployment)
      and ($since::timestamptz is null or s.ts >= $since::timestamptz)
      and ($until::timestamptz is null or s.ts < $until::timestamptz)
),

weighted as (
    select
        *,
        epoch_us(ts) // $bucket_us as bucket,
        -- ties broken by file and line, as in concurrency_sampled
        least(
            coalesce(epoch_us(lead(ts) over (partition by deployment order by ts, src_file, src_line))
                     - epoch_us(ts), 0),
            $max_gap_s * 1e6
        ) as dur
    from steps
),

final as (
    select
        deployment,
        to_timestamp(bucket * $bucket_us / 1e6) as ts,
        max(running) as running_max,
        max(waiting) as waiting_max,
        max(in_system) as in_system_max,
        coalesce(sum(in_system * dur) / nullif(sum(dur), 0), avg(in_system)) as in_system_mean,
        max(kv_tokens) as kv_tokens_max,
        sum(dur) / 1e6 as covered_s
    from weighted
    group by deployment, bucket
)

select * from final
order by deployment, ts
