-- Question: how many requests were waiting and running on each deployment at every instant, and how many KV
--   tokens did the running ones hold?
-- Grain: one row per (deployment, grp, instant at which a request arrived, was admitted, got its first token
--   or ended): the state from that instant to the next one, a step function built by a sweep over +1/-1
--   events.
-- Parameters: $since, $until (TIMESTAMPTZ or NULL: events before the window move to its start, events after
--   its end are dropped); $per_group (BOOLEAN: besides each deployment as a whole, sweep each group on its
--   own).
-- Columns: deployment, grp (NULL = every request of the deployment), t (microseconds since the epoch),
--   dur_us (to the next instant; the last state lasts to the window's end when requests remain), arrivals
--   (requests arriving at t inside the window), running, waiting, unknown (in the system with the split
--   unknown), in_system, kv_start, kv_end (live KV tokens at t and just before the next instant).
-- Intervals are half-open: waiting [arrival, arrival + queue_s), running [arrival + queue_s, end); a request
--   whose queue_s is unknown counts as `unknown` over [arrival, end). Live KV tokens of a running request:
--   prompt_tokens from admission plus output tokens growing linearly from 0 at the first token to
--   output_tokens at the end (an approximation: chunked prefill fills the prompt gradually, and tokens are
--   discrete). Requests of zero duration are never in the system and are left out.
-- Oracle: a test reference for attribution.analyses.sweep.segments (the product path), which tests compare
--   with it; the product never runs this file.
with

requests as (
    select * from int_analysis_requests
    where t_arrival is not null and t_end > t_arrival
      and ($since::timestamptz is null or t_end > epoch_us($since::timestamptz))
      and ($until::timestamptz is null or t_arrival < epoch_us($until::timestamptz))
),

bounds as (
    select
        epoch_us($since::timestamptz) as lo,
        -- the sweep ends at the window's end, or where the data ends if that is earlier
        least(epoch_us($until::timestamptz), max(t_end)) as hi,
        min(t_arrival) as origin
    from requests
),

scoped as (
    select deployment, null::varchar as grp, * exclude (deployment, grp) from requests
    union all
    select deployment, grp, * exclude (deployment, grp) from requests where $per_group
),

shaped as (
    select
        deployment,
        grp,
        t_arrival,
        t_admit,
        t_end,
        t_admit is not null as known,
        coalesce(t_first, t_admit) as t_grow,
        coalesce(prompt_tokens, 0)::double as prompt,
        coalesce(output_tokens, 0)::double as output,
        (t_arrival >= coalesce(lo, t_arrival))::integer as counted_arrival,
        origin
    from scoped, bounds
),

rated as (
    select
        *,
        -- growth in tokens per microsecond; a request whose first token is its end gets its output at once
        case when known and t_end > t_grow then output / (t_end - t_grow) else 0.0 end as rate,
        case when known and t_end <= t_grow then output else 0.0 end as jump
    from shaped
),

events as (
    select deployment, grp, t_arrival as t, counted_arrival as arrivals,
        known::integer as d_wait, 0 as d_run, (not known)::integer as d_unk, 0.0 as d_c, 0.0 as d_r, 0.0 as d_b
    from rated
    union all
    select deployment, grp, t_admit, 0, -1, 1, 0, prompt, 0.0, 0.0
    from rated where known
    union all
    select deployment, grp, t_grow, 0, 0, 0, 0, jump, rate, rate * (t_grow - origin)
    from rated where known
    union all
    select deployment, grp, t_end, 0, 0, -(known::integer), -((not known)::integer),
        case when known then -(prompt + jump) else 0.0 end, -rate, -rate * (t_grow - origin)
    from rated
),

clipped as (
    select events.* replace (greatest(t, coalesce(lo, t)) as t)
    from events, bounds
    where hi is null or t < hi
),

instants as (
    select
        deployment, grp, t,
        sum(arrivals) as arrivals, sum(d_wait) as d_wait, sum(d_run) as d_run, sum(d_unk) as d_unk,
        sum(d_c) as d_c, sum(d_r) as d_r, sum(d_b) as d_b
    from clipped
    group by deployment, grp, t
),

states as (
    select
        deployment, grp, t, arrivals,
        sum(d_run) over w as running,
        sum(d_wait) over w as waiting,
        sum(d_unk) over w as unknown,
        sum(d_c) over w as c,
        sum(d_r) over w as r,
        sum(d_b) over w as b,
        lead(t) over (partition by deployment, grp order by t) as t_next
    from instants
    window w as (partition by deployment, grp order by t rows between unbounded preceding and current row)
),

spans as (
    select
        *,
        -- the last state of a partition lasts to the window's end only if requests are still in the system
        coalesce(t_next, case when running + waiting + unknown > 0 then hi end, t) as t_end_segment
    from states, bounds
),

final as (
    select
        deployment,
        grp,
        t,
        t_end_segment - t as dur_us,
        arrivals::bigint as arrivals,
        running::bigint as running,
        waiting::bigint as waiting,
        unknown::bigint as unknown,
        (running + waiting + unknown)::bigint as in_system,
        -- kv(t) = constant part + growth rate * t - offsets (t relative to `origin` keeps the doubles exact)
        -- rounded to a thousandth of a token: the running sums leave rounding residue where nothing is live
        greatest(round(c + r * (t - origin) - b, 3), 0.0) + 0.0 as kv_start,
        greatest(round(c + r * (t_end_segment - origin) - b, 3), 0.0) + 0.0 as kv_end
    from spans
)

select * from final
