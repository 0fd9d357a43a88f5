-- Question: for deployments that have only the engine's own step lines, how many requests ran and waited at
--   once, and how many KV tokens were live, as far as those samples show?
-- Grain: one row per (deployment, metric); metric is running, waiting, in_system or kv_tokens. An engine with
--   several data-parallel ranks (engine_index > 0) is reported per rank as `deployment #rank`.
-- Parameters: $since, $until (TIMESTAMPTZ or NULL), $deployments (VARCHAR[]: which deployments),
--   $max_gap_s (DOUBLE: a line stands for at most this long; engines print nothing while idle).
-- Columns: deployment, grp (NULL), metric, peak, peak_at, mean, p50, p90, p99 (each line weighted by the time
--   to the next line of its engine, capped at $max_gap_s; pXX = the smallest value v such that the lines
--   with values <= v cover at least XX% of the weighted time), span_s (weighted time), arrivals (NULL), lines.
--   kv_tokens = the line's KV token count, else its KV usage times the engine's KV pool.
-- These are samples: a peak between two lines is missed.
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

weighted_lines as (
    select
        * exclude (src_file, src_line),
        -- ties (two logs of one pod at the same second, across a restart) broken by file and line: deterministic
        least(
            coalesce(epoch_us(lead(ts) over (partition by deployment order by ts, src_file, src_line))
                     - epoch_us(ts), 0),
            $max_gap_s * 1e6
        ) as dur
    from steps
),

long as (
    unpivot weighted_lines on running, waiting, in_system, kv_tokens into name metric value value
),

peaks as (
    select deployment, metric, max(value) as peak, count(*) as lines
    from long
    group by all
),

cumulative as (
    select
        deployment, metric, value, ts, dur,
        sum(dur) over (partition by deployment, metric order by value) as cum,
        sum(dur) over (partition by deployment, metric) as total
    from long
),

final as (
    select
        c.deployment,
        null::varchar as grp,
        c.metric,
        p.peak,
        min(c.ts) filter (where c.value = p.peak) as peak_at,
        coalesce(sum(c.value * c.dur) / nullif(sum(c.dur), 0), avg(c.value)) as mean,
        min(c.value) filter (where c.cum >= 0.5 * c.total) as p50,
        min(c.value) filter (where c.cum >= 0.9 * c.total) as p90,
        min(c.value) filter (where c.cum >= 0.99 * c.total) as p99,
        max(c.total) / 1e6 as span_s,
        null::bigint as arrivals,
        p.lines
    from cumulative as c
    join peaks as p on p.deployment = c.deployment and p.metric = c.metric
    group by c.deployment, c.metric, p.peak, p.lines
)

select * from final
order by deployment, list_position(['running', 'waiting', 'in_system', 'kv_tokens'], metric)
