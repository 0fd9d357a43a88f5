-- Question: what time span do the engines' and gateways' lines and samples cover that the dashboard's pages
--   read beside the requests (engine step lines, engine starts, API access lines, Prometheus samples)? With
--   the requests' span (dashboard_filter_choices.sql) it makes the ends of the time-range slider, so that the
--   slider left whole spans every row the pages count.
-- Grain: one row.
-- Parameters: none.
-- Columns: first, last (UTC; NULL in a store without such rows).
with

times as (
    select min(ts) as first, max(ts) as last from engine_steps
    union all
    select min(ts), max(ts) from engine_config
    union all
    select min(ts), max(ts) from access_log
    union all
    select min(ts), max(ts) from metric_histograms
    union all
    select min(ts), max(ts) from metric_counters
),

final as (
    select min(first) as first, max(last) as last
    from times
)

select * from final
