-- Question: per deployment (and group), how many requests ran and waited at once: peak, time-weighted mean
--   and percentiles, what each arrival found, and how many KV tokens the running requests held?
-- Grain: one row per (deployment, grp, metric); metric is running, waiting, in_system, kv_tokens or
--   seen_at_arrival; grp NULL = every request of the deployment.
-- Parameters: $quantiles (DOUBLE[]: the percentiles as fractions, e.g. [0.5, 0.9, 0.95, 0.99, 0.999]; compared
--   as DECIMAL(18, 6)); reads concurrency_segments (the rows of queries/int_concurrency_sweep.sql but by_group).
-- Columns: deployment, grp, metric, peak, peak_at (first instant at the peak), mean, q (the list of percentiles,
--   in the order of $quantiles; attribution spreads it into p50, p90, ..., p99_9), span_s, arrivals. Time-weighted (running, waiting, in_system, kv_tokens): over the partition's span (first arrival
--   to last end, within the window), mean = time average, pXX = the smallest value v such that the state is
--   <= v for at least XX% of the span (for kv_tokens, each state counts with its mean in whole tokens).
--   seen_at_arrival: the other requests in the system (running + waiting + unknown) at the instant a request
--   arrived; mean and quantile_cont percentiles (linear interpolation) over arrivals.
--   running, waiting and kv_tokens appear only where some request's queue_s is known.
-- Oracle: a test reference for attribution.analyses.sweep.stats (the product path), which tests compare with
--   it; the product never runs this file.
with

segments as (
    select * from concurrency_segments
),

applicable as (
    -- running/waiting/kv need a known waiting/running split somewhere in the partition
    select deployment, grp, max(running) > 0 as split_known
    from segments
    group by deployment, grp
),

peaks as (
    -- each struct orders by the value, then by the earlier instant: the first instant at the peak
    select
        deployment, grp,
        max(running) as running, arg_max(t, {v: running, neg_t: -t}) as running_t,
        max(waiting) as waiting, arg_max(t, {v: waiting, neg_t: -t}) as waiting_t,
        max(in_system) as in_system, arg_max(t, {v: in_system, neg_t: -t}) as in_system_t,
        max(greatest(kv_start, kv_end)) as kv_tokens,
        arg_max(t, {v: greatest(kv_start, kv_end), neg_t: -t}) as kv_tokens_t
    from segments
    group by deployment, grp
),

peaks_long as (
    select deployment, grp, 'running' as metric, running::double as peak, running_t as peak_t from peaks
    union all select deployment, grp, 'waiting', waiting, waiting_t from peaks
    union all select deployment, grp, 'in_system', in_system, in_system_t from peaks
    union all select deployment, grp, 'kv_tokens', kv_tokens, kv_tokens_t from peaks
),

by_value as (
    -- time spent at each value (for kv_tokens each state counts with its mean, in whole tokens)
    select deployment, grp, 'running' as metric, running::double as value, sum(dur_us)::bigint as dur
    from segments group by all
    union all
    select deployment, grp, 'waiting', waiting, sum(dur_us)::bigint from segments group by all
    union all
    select deployment, grp, 'in_system', in_system, sum(dur_us)::bigint from segments group by all
    union all
    select deployment, grp, 'kv_tokens', round((kv_start + kv_end) / 2), sum(dur_us)::bigint from segments group by all
),

cumulative as (
    select
        *,
        sum(dur) over (partition by deployment, grp, metric order by value) as cum,
        sum(dur) over (partition by deployment, grp, metric) as total
    from by_value
),

quantiles as (
    select unnest($quantiles::double[])::decimal(18, 6) as q, generate_subscripts($quantiles::double[], 1) as i
),

per_quantile as (
    -- the DECIMAL times an integer compares exactly
    select c.deployment, c.grp, c.metric, qs.i, min(c.value) filter (where c.cum >= qs.q * c.total) as v
    from cumulative as c, quantiles as qs
    group by all
),

weighted as (
    select
        c.deployment, c.grp, c.metric,
        sum(c.value * c.dur) / nullif(sum(c.dur), 0) as mean,
        max(c.total) / 1e6 as span_s
    from cumulative as c
    group by all
),

weighted_q as (
    select deployment, grp, metric, list(v order by i) as q
    from per_quantile
    group by all
),

timed as (
    select
        w.deployment, w.grp, w.metric, p.peak, to_timestamp(p.peak_t / 1e6) as peak_at,
        w.mean, wq.q, w.span_s, null::bigint as arrivals
    from weighted as w
    join weighted_q as wq
        on w.deployment = wq.deployment and w.grp is not distinct from wq.grp and w.metric = wq.metric
    join peaks_long as p
        on w.deployment = p.deployment and w.grp is not distinct from p.grp and w.metric = p.metric
    join applicable as a
        on w.deployment = a.deployment and w.grp is not distinct from a.grp
    where w.metric = 'in_system' or a.split_known
),

arrivals as (
    select deployment, grp, t, (in_system - 1)::double as seen, unnest(range(arrivals)) as k
    from segments
    where arrivals > 0
),

seen as (
    select
        deployment, grp, 'seen_at_arrival' as metric,
        max(seen) as peak,
        to_timestamp(arg_max(t, {top: seen, neg_t: -t}) / 1e6) as peak_at,
        avg(seen) as mean,
        quantile_cont(seen, $quantiles::double[]) as q,
        count(*) as arrivals
    from arrivals
    group by all
),

final as (
    select * from timed
    union all
    select deployment, grp, metric, peak, peak_at, mean, q, null, arrivals from seen
)

select * from final
order by deployment, grp nulls first,
    list_position(['running', 'waiting', 'in_system', 'kv_tokens', 'seen_at_arrival'], metric)
