-- Question: how many requests were waiting and running on each deployment at every instant, and how many KV
--   tokens did the running ones hold (the concurrency sweep as window functions)?
-- Grain: one row per (deployment, grp, instant at which a request arrived, was admitted, got its first token
--   or ended): the state from that instant to the next one. by_group false: every request of the deployment
--   (grp NULL); true: the requests of one group (only with $per_group).
-- Parameters: $since, $until (TIMESTAMPTZ or NULL: events before the window move to its start, events after
--   its end are dropped: the window concurrency_requests was read with); $per_group (BOOLEAN). Reads the
--   temporary table concurrency_requests (queries/concurrency_requests.sql: the requests the sweep reads).
-- Columns: by_group, deployment, grp, t (microseconds since the epoch), dur_us, arrivals, running, waiting,
--   unknown, in_system, kv_start, kv_end: the rows of attribution.analyses.sweep.segments, with its
--   arithmetic (events at one instant summed, running sums in time order, halves rounded up, KV to a
--   thousandth).
-- Engine: Spark runs this (attribution.analyses.sweep_sql: only the small results of
--   concurrency_sweep_histogram, _peaks and _timeseries come back to the driver); the DuckDB path sweeps in
--   NumPy (attribution.analyses.sweep over the rows of concurrency_requests.sql); tests check both agree.
--   The `-- @spark` blocks are kept for cost, not portability: each request read once (its by_group copies
--   and its four events from one generator, where the union reads the requests eight times) and one shuffle
--   (the rows distributed by deployment and group, which the sum per instant and the running sums both keep,
--   where the DuckDB text would shuffle every event twice).
with

requests as (
    select deployment, grp, t_arrival, t_admit, t_first, t_end, prompt_tokens, output_tokens
    from concurrency_requests
),

bounds as (
    select
        epoch_us($since::timestamptz) as lo,
        -- the sweep ends at the window's end, or where the data ends if that is earlier (least skips NULL)
        least(epoch_us($until::timestamptz), max(t_end)) as hi,
        min(t_arrival) as origin
    from requests
),

scoped as (
-- @duckdb
    select false as by_group, deployment, null::varchar as grp, t_arrival, t_admit, t_first, t_end,
        prompt_tokens, output_tokens
    from requests
    union all
    select true, deployment, grp, t_arrival, t_admit, t_first, t_end, prompt_tokens, output_tokens
    from requests where $per_group
-- @spark
    select by_group, deployment, case when by_group then grp end as grp, t_arrival, t_admit, t_first, t_end,
        prompt_tokens, output_tokens
    from requests
    lateral view explode(case when $per_group then array(false, true) else array(false) end) as by_group
-- @end
),

shaped as (
    select
        s.by_group, s.deployment, s.grp, s.t_arrival, s.t_admit, s.t_end,
        s.t_admit is not null as known,
        coalesce(s.t_first, s.t_admit) as t_grow,
        coalesce(s.prompt_tokens, 0)::double as prompt,
        coalesce(s.output_tokens, 0)::double as output,
        case when b.lo is null or s.t_arrival >= b.lo then 1 else 0 end as counted,
        b.origin
    from scoped as s, bounds as b
),

rated as (
    select
        *,
        -- growth in tokens per microsecond; a request whose first token is its end gets its output at once
        case when known and t_end > t_grow then output / (t_end - t_grow) else 0.0::double end as rate,
        case when known and t_end <= t_grow then output else 0.0::double end as jump
    from shaped
),

events as (
-- @duckdb
    select by_group, deployment, grp, t_arrival as t, counted as arrivals,
        case when known then 1 else 0 end as d_wait, 0 as d_run, case when known then 0 else 1 end as d_unk,
        0.0::double as d_c, 0.0::double as d_r, 0.0::double as d_b
    from rated
    union all
    select by_group, deployment, grp, t_admit, 0, -1, 1, 0, prompt, 0.0::double, 0.0::double
    from rated where known
    union all
    select by_group, deployment, grp, t_grow, 0, 0, 0, 0, jump, rate, rate * (t_grow - origin)
    from rated where known
    union all
    select by_group, deployment, grp, t_end, 0, 0, case when known then -1 else 0 end,
        case when known then 0 else -1 end, case when known then -(prompt + jump) else 0.0::double end, -rate,
        case when known then -(rate * (t_grow - origin)) else 0.0::double end
    from rated
-- @spark
    select by_group, deployment, grp, t, arrivals, d_wait, d_run, d_unk, d_c, d_r, d_b
    from rated
    lateral view inline(array(
        named_struct('t', t_arrival, 'arrivals', counted, 'd_wait', case when known then 1 else 0 end, 'd_run', 0,
            'd_unk', case when known then 0 else 1 end, 'd_c', 0.0::double, 'd_r', 0.0::double,
            'd_b', 0.0::double, 'keep', true),
        named_struct('t', t_admit, 'arrivals', 0, 'd_wait', -1, 'd_run', 1, 'd_unk', 0, 'd_c', prompt,
            'd_r', 0.0::double, 'd_b', 0.0::double, 'keep', known),
        named_struct('t', t_grow, 'arrivals', 0, 'd_wait', 0, 'd_run', 0, 'd_unk', 0, 'd_c', jump, 'd_r', rate,
            'd_b', rate * (t_grow - origin), 'keep', known),
        named_struct('t', t_end, 'arrivals', 0, 'd_wait', 0, 'd_run', case when known then -1 else 0 end,
            'd_unk', case when known then 0 else -1 end,
            'd_c', case when known then -(prompt + jump) else 0.0::double end, 'd_r', -rate,
            'd_b', case when known then -(rate * (t_grow - origin)) else 0.0::double end, 'keep', true)
    )) e as t, arrivals, d_wait, d_run, d_unk, d_c, d_r, d_b, keep
    where keep
-- @end
),

clipped as (
    select
        e.by_group, e.deployment, e.grp, greatest(e.t, coalesce(b.lo, e.t)) as t, e.arrivals, e.d_wait,
        e.d_run, e.d_unk, e.d_c, e.d_r, e.d_b, b.origin, b.hi
    from events as e, bounds as b
    where b.hi is null or greatest(e.t, coalesce(b.lo, e.t)) < b.hi
-- @spark
    -- one shuffle: the sum per instant and the running sums below both keep to these partitions
    distribute by e.by_group, e.deployment, e.grp
-- @end
),

instants as (
    -- the tie rule: events at one instant are one step (intervals are half-open)
    select
        by_group, deployment, grp, t, max(origin) as origin, max(hi) as hi,
        sum(arrivals) as arrivals, sum(d_wait) as d_wait, sum(d_run) as d_run, sum(d_unk) as d_unk,
        sum(d_c) as d_c, sum(d_r) as d_r, sum(d_b) as d_b
    from clipped
    group by by_group, deployment, grp, t
),

states as (
    select
        by_group, deployment, grp, t, origin, hi, arrivals,
        sum(d_run) over w as running,
        sum(d_wait) over w as waiting,
        sum(d_unk) over w as unknown,
        sum(d_c) over w as c,
        sum(d_r) over w as r,
        sum(d_b) over w as b,
        lead(t) over (partition by by_group, deployment, grp order by t) as t_next
    from instants
    window w as (
        partition by by_group, deployment, grp order by t rows between unbounded preceding and current row
    )
),

spans as (
    select
        *,
        -- the last state lasts to the window's end only if requests are still in the system
        coalesce(t_next, case when running + waiting + unknown > 0 and hi is not null then hi end, t) as t_to
    from states
),

thousandths as (
    -- kv(t) = constant part + growth rate * t - offsets (t relative to `origin` keeps the doubles exact)
    select
        *,
        (c + r * (t - origin) - b) * 1000 as k_start,
        (c + r * (t_to - origin) - b) * 1000 as k_end
    from spans
),

final as (
    select
        by_group,
        deployment,
        grp,
        t,
        t_to - t as dur_us,
        arrivals::bigint as arrivals,
        running::bigint as running,
        waiting::bigint as waiting,
        unknown::bigint as unknown,
        (running + waiting + unknown)::bigint as in_system,
        -- halves rounded up to a thousandth (sweep.round3): the running sums leave residue where nothing is
        -- live; + 0.0 makes -0.0 0.0
        greatest((floor(k_start) + case when k_start - floor(k_start) >= 0.5 then 1 else 0 end) / 1000,
            0.0::double) + 0.0::double as kv_start,
        greatest((floor(k_end) + case when k_end - floor(k_end) >= 0.5 then 1 else 0 end) / 1000,
            0.0::double) + 0.0::double as kv_end
    from thousandths
)

select * from final
