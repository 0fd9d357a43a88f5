-- Question: how many requests arrived in each clock minute, per group (the per-minute rate over time)?
-- Grain: one row per (group, UTC clock minute) of int_arrival_minutes (empty minutes of the span included).
-- Parameters: none.
-- Columns: grp, minute (start of the minute, TIMESTAMPTZ), requests.
with

minutes as (
    select * from int_arrival_minutes
),

final as (
    select grp, minute, requests from minutes
)

select * from final
order by grp = '(all)', grp = '(none)', grp, minute
