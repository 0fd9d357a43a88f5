-- Question: does any timed engine step line lie outside the window [$since, $until)?
-- Grain: one row.
-- Parameters: $since, $until (TIMESTAMPTZ, NULL = open).
-- Columns: outside (true when a line with a timestamp lies before $since or at or after $until: then the
--   window's threshold_step_rows are not every day's).
with

outside as (
    select 1
    from engine_steps
    where ts is not null
      and (ts < $since::timestamptz or ts >= $until::timestamptz)
),

final as (
    select exists (select * from outside) as outside
)

select * from final
