-- Question: which groups have gaps between arrivals, in the order arrival_gaps_by_group gives them?
-- Grain: one row per group of int_arrival_times with at least one gap.
-- Parameters: none.
-- Columns: grp, gaps (rows with a gap, ties' zeros included).
with

times as (
    select * from int_arrival_times
),

final as (
    select grp, count(*) as gaps from times where gap_s is not null group by grp
)

select * from final
order by grp = '(all)', grp = '(none)', grp
