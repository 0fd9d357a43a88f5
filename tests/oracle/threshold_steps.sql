-- Question: how often, for how long and in how many episodes did each step-scoped feature's quantity cross
--   its threshold?
-- Grain: one row per (feature, level, grp): level 'deployment' (grp = deployment) or 'day' (grp = UTC date).
-- Parameters: $max_gap_s (DOUBLE: a row stands for the time until the next row of its file, at most this
--   long, so idle gaps do not count). Reads thr_step_values (tests/oracle/threshold_step_values.sql).
-- Columns: feature, level, grp, rows (step or periodic rows carrying the quantity), crossed_rows, row_share,
--   seconds, crossed_seconds, time_share (crossed_seconds / seconds), episodes (runs of consecutive crossing
--   rows of one file, in file order; an episode counts on the day it began), longest_episode_s, max_value,
--   first_crossed, last_crossed, kinds (row kinds used), estimated (decode batch sizes taken from periodic
--   `running` counts, not from decode batch lines), cuda_graph_off_rows (rows where the engine itself logged
--   `cuda graph: False`).
-- Oracle: a test reference for attribution.thresholds.steps.steps_table (the product path), which tests
--   compare with it; the product never runs this file.
with

flagged as (
    select
        *,
        -- least() skips NULLs: the last row of a file must stay NULL (it stands for no time), not max_gap_s
        epoch(lead(ts) over (partition by part order by ts, line)) - epoch(ts) as gap,
        -- gaps and islands: consecutive crossing rows of a file share one value of this difference
        row_number() over (partition by part order by ts, line)
            - row_number() over (partition by part, crossed order by ts, line) as island
    from thr_step_values
),

runs as (
    select *, case when gap is not null then least(gap, $max_gap_s) end as dt, strftime(timezone('UTC', ts), '%Y-%m-%d') as day
    from flagged
),

episodes as (
    select feature, deployment, min(day) as day, sum(coalesce(dt, 0)) as seconds
    from runs
    where crossed
    group by feature, deployment, part, island
),

longest as (
    select
        feature,
        case when grouping(deployment) = 0 then 'deployment' else 'day' end as level,
        case when grouping(deployment) = 0 then deployment else day end as grp,
        count(*) as episodes,
        max(seconds) as longest_episode_s
    from episodes
    group by grouping sets ((feature, deployment), (feature, day))
),

stats as (
    select
        feature,
        case when grouping(deployment) = 0 then 'deployment' else 'day' end as level,
        case when grouping(deployment) = 0 then deployment else day end as grp,
        count(*) as rows,
        count(*) filter (where crossed) as crossed_rows,
        sum(coalesce(dt, 0)) as seconds,
        sum(coalesce(dt, 0)) filter (where crossed) as crossed_seconds,
        max(value) as max_value,
        min(ts) filter (where crossed) as first_crossed,
        max(ts) filter (where crossed) as last_crossed,
        string_agg(distinct kind, ',' order by kind) as kinds,
        bool_or(estimated) as estimated,
        count(*) filter (where cuda_graph = false) as cuda_graph_off_rows
    from runs
    group by grouping sets ((feature, deployment), (feature, day))
),

final as (
    select
        s.feature,
        s.level,
        s.grp,
        s.rows,
        s.crossed_rows,
        s.crossed_rows / s.rows as row_share,
        s.seconds,
        coalesce(s.crossed_seconds, 0) as crossed_seconds,
        coalesce(s.crossed_seconds, 0) / nullif(s.seconds, 0) as time_share,
        coalesce(l.episodes, 0) as episodes,
        l.longest_episode_s,
        s.max_value,
        s.first_crossed,
        s.last_crossed,
        s.kinds,
        s.estimated,
        s.cuda_graph_off_rows
    from stats as s
    left join longest as l using (feature, level, grp)
)

select * from final
order by feature, level, grp
