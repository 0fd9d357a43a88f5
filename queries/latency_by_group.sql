-- Question: how long does each phase of a request take per group: queueing, time to first token, time per
--   output token and end to end?
-- Grain: one row per (grp, metric); metric is queue_s, ttft_s, tpot_s or e2e_s; completed requests only
--   (status not error / failed / aborted) whose source gave that phase.
-- Parameters: none (reads analysis_requests).
-- Columns: grp, metric, requests, mean, p50, p90, p99, p99_9, max (seconds; exact percentiles, quantile_cont
--   = linear interpolation, numpy's default).
with

requests as (
    select * from analysis_requests where in_window and ok
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
        quantile_cont(seconds, [0.5, 0.9, 0.99, 0.999]) as q,
        max(seconds) as max
    from long
    group by grp, metric
),

final as (
    select grp, metric, requests, mean, q[1] as p50, q[2] as p90, q[3] as p99, q[4] as p99_9, max
    from stats
)

select * from final
order by grp = '(none)', grp, list_position(['queue_s', 'ttft_s', 'tpot_s', 'e2e_s'], metric)
