-- Question: how many timed engine step lines are there, and how many of them lie in the window [$since, $until)?
--   (whether a dashboard reads every line once, to cut each window's rows from them, or the window's alone)
-- Grain: one row.
-- Parameters: $since, $until (TIMESTAMPTZ, NULL = open).
-- Columns: lines (with a timestamp), in_window.
with

lines as (
    select ts
    from engine_steps
    where ts is not null
),

final as (
    select
        count(*) as lines,
        count(*) filter (where ($since::timestamptz is null or ts >= $since::timestamptz)
                           and ($until::timestamptz is null or ts < $until::timestamptz)) as in_window
    from lines
)

select * from final
