-- Question: how long does each phase of a request take per group: queueing, time to first token, time per
--   output token and end to end?
-- Grain: one row per (grp, metric); metric is queue_s, ttft_s, tpot_s or e2e_s; completed requests only
--   (status not error / failed / aborted) whose source gave that phase.
-- Parameters: $quantiles (DOUBLE[] of fractions, e.g. [0.5, 0.9, 0.95, 0.99, 0.999]).
-- Columns: grp, metric, requests, mean, q (the $quantiles of the seconds, in order: exact percentiles,
--   quantile_cont = linear interpolation, numpy's default), max.
with

requests as (
    select * from int_analysis_requests where in_window and ok
),

long as (
    unpivot (select grp, queue_s, ttft_s, tpot_s, e2e_s from requests)
    on queue_s, ttft_s, tpot_s, e2e_s
    into name metric value seconds
),

stats as (
    select
        grp,
        metric,
        count(*) as requests,
        avg(seconds) as mean,
        quantile_cont(seconds, $quantiles::double[]) as q,
        max(seconds) as max
    from long
    group by grp, metric
),

final as (
    select grp, metric, requests, mean, q, max
    from stats
)

select * from final
order by grp = '(none)', grp, list_position(['queue_s', 'ttft_s', 'tpot_s', 'e2e_s'], metric)
