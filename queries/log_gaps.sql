-- Question: where did a deployment's logs fall silent for longer than $min_gap_s inside the window?
-- Grain: one row per silence of one stream: a (deployment, source, kind) of requests (arrivals, else end times)
--   or engine step lines, inside the window; at the window's edges, measured from the first and to the last
--   event of every stream together (a pod that started late or stopped early).
-- Parameters: $since, $until (TIMESTAMPTZ; NULL leaves that end open); $min_gap_s (DOUBLE, seconds).
-- Columns: deployment, source, kind ('requests' or 'steps'), gap_start, gap_end (the events either side, or
--   the span's edge), gap_s, edge ('inside', 'start': the stream began late, 'end': it stopped early), events
--   (of the stream in the window).
with

events as (
    select deployment, source, 'requests' as kind, coalesce(arrival, finished) as ts from requests
    union all
    select deployment, source, 'steps' as kind, ts from engine_steps
),

windowed as (
    select * from events
    where ts is not null
        and ($since::timestamptz is null or ts >= $since::timestamptz)
        and ($until::timestamptz is null or ts < $until::timestamptz)
),

span as (
    select min(ts) as first_ts, max(ts) as last_ts from windowed
),

streams as (
    select deployment, source, kind, min(ts) as first_ts, max(ts) as last_ts, count(*) as events
    from windowed
    group by all
),

-- A silence longer than $min_gap_s holds no two events of one bucket of that width (whole microseconds from
-- the window's first event): it runs from the last event of a bucket to the first of the next non-empty one.
-- So the consecutive events are looked for among the buckets' ends (a hash aggregate, then a window over a few
-- hundred buckets per stream, instead of sorting every request and step line).
buckets as (
    select
        w.deployment, w.source, w.kind,
        (epoch_us(w.ts) - epoch_us(span.first_ts)) // greatest(floor($min_gap_s * 1e6)::bigint, 1) as bucket,
        min(w.ts) as first_ts,
        max(w.ts) as last_ts
    from windowed as w, span
    group by all
),

ordered as (
    select
        deployment, source, kind, first_ts as ts,
        lag(last_ts) over (partition by deployment, source, kind order by bucket) as prev_ts
    from buckets
),

inside as (
    select deployment, source, kind, prev_ts as gap_start, ts as gap_end, 'inside' as edge
    from ordered
    where prev_ts is not null and (epoch_us(ts) - epoch_us(prev_ts)) / 1e6 > $min_gap_s
),

edges as (
    select s.deployment, s.source, s.kind, span.first_ts as gap_start, s.first_ts as gap_end, 'start' as edge
    from streams as s, span
    where (epoch_us(s.first_ts) - epoch_us(span.first_ts)) / 1e6 > $min_gap_s
    union all
    select s.deployment, s.source, s.kind, s.last_ts as gap_start, span.last_ts as gap_end, 'end' as edge
    from streams as s, span
    where (epoch_us(span.last_ts) - epoch_us(s.last_ts)) / 1e6 > $min_gap_s
),

final as (
    select
        g.deployment,
        g.source,
        g.kind,
        g.gap_start,
        g.gap_end,
        (epoch_us(g.gap_end) - epoch_us(g.gap_start)) / 1e6 as gap_s,
        g.edge,
        s.events
    from (select * from inside union all select * from edges) as g
    join streams as s using (deployment, source, kind)
)

select * from final
order by gap_s desc, deployment, source, kind, gap_start
