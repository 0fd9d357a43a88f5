-- Question: which engine step lines count running and waiting requests and live KV tokens on these
--   deployments, and how long does each line stand for?
-- Grain: one row per engine_steps line with a running count, in the window [$since, $until). An engine with
--   several data-parallel ranks (engine_index > 0) is reported per rank as `deployment #rank`.
-- Parameters: $since, $until (TIMESTAMPTZ or NULL), $deployments (VARCHAR[]: which deployments),
--   $max_gap_s (DOUBLE: a line stands for at most this long; engines print nothing while idle).
-- Columns: deployment, ts, running, waiting, in_system (running + waiting), kv_tokens (the line's KV token
--   count, else its KV usage times the engine's KV pool), dur (microseconds to the next line of its engine,
--   capped at $max_gap_s; 0 for the last; ties, two logs of one pod at the same second across a restart,
--   broken by file and line so the order is deterministic).
-- Read by concurrency_sampled and concurrency_sampled_timeseries (materialised once per analysis).
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
        s.running::double as running,
        s.waiting::double as waiting,
        (s.running + coalesce(s.waiting, 0))::double as in_system,
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

final as (
    select
        * exclude (src_file, src_line),
        least(
            coalesce(epoch_us(lead(ts) over (partition by deployment order by ts, src_file, src_line))
                     - epoch_us(ts), 0),
            $max_gap_s * 1e6
        ) as dur
    from steps
)

select * from final
