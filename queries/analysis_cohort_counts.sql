-- Question: how many labels and engine versions does the window hold (is there a before and an after)?
-- Grain: one row.
-- Parameters: none.
-- Columns: labels, versions (distinct non-NULL values among the requests of int_analysis_requests in the window).
with

requests as (
    select * from int_analysis_requests where in_window
),

final as (
    select count(distinct label) as labels, count(distinct engine_version) as versions
    from requests
)

select * from final
