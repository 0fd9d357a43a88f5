-- Question: which gaps between consecutive arrivals does a fitted inter-arrival distribution describe?
-- Grain: one row per strictly positive gap of int_arrival_times (tied arrivals, gaps of 0, are left out: a
--   continuous distribution cannot fit them).
-- Parameters: none.
-- Columns: grp, gap_s.
with

times as (
    select * from int_arrival_times
),

final as (
    select grp, gap_s from times where gap_s > 0
)

select * from final
order by grp = '(all)', grp = '(none)', grp, gap_s
