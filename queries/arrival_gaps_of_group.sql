-- Question: what are the gaps between consecutive arrivals of one group, in time order?
-- Grain: one row per request of int_arrival_times in group $grp but the group's first (gaps of 0, tied
--   arrivals, included), as arrival_gaps_by_group gives that group's rows; one group at a time, so a caller
--   holds one group's gaps, not every group's with their names (at 6M requests 12M rows).
-- Parameters: $grp (VARCHAR: the group, as int_arrival_times names it).
-- Columns: t (arrival that ends the gap, us since the epoch), gap_s.
with

times as (
    select * from int_arrival_times
),

final as (
    select t, gap_s from times where grp = $grp and gap_s is not null
)

select * from final
order by t
