-- Question: which groups have gaps between arrivals, in the order arrival_gaps_by_group gives them?
-- Grain: one row per group of int_arrival_times with at least one gap (attribution.analyses.arrival_fits
--   fetches each one's rows of arrival_gaps_by_group in turn; tests/test_arrivals.py checks the two orders agree).
-- Parameters: none.
-- Columns: grp.
with

times as (
    select * from int_arrival_times
),

final as (
    select distinct grp from times where gap_s is not null
)

select * from final
order by grp = '(all)', grp = '(none)', grp
