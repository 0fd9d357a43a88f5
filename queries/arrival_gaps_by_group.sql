-- Question: what are the gaps between consecutive arrivals of each group, in time order?
-- Grain: one row per request of int_arrival_times but each group's first (gaps of 0, tied arrivals, included:
--   the fits leave them out, the gap CV counts them).
-- Parameters: none.
-- Columns: grp, t (arrival that ends the gap, us since the epoch), gap_s.
with

times as (
    select * from int_arrival_times
),

final as (
    select grp, t, gap_s from times where gap_s is not null
)

select * from final
order by grp = '(all)', grp = '(none)', grp, t
