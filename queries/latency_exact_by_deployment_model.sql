-- Question: what are the exact latency percentiles per deployment and model, to set beside the
--   bucket-interpolated ones a Prometheus histogram gives for the same deployment, model and window?
-- Grain: one row per (deployment, model, metric); metric is queue, ttft, tpot or e2e; completed requests
--   arriving in the window whose source gave that phase.
-- Parameters: $quantiles (DOUBLE[] of fractions, e.g. [0.5, 0.9, 0.99]).
-- Columns: deployment, model, metric, requests, q (the $quantiles of the seconds, in order: quantile_cont).
with

requests as (
    select deployment, model, queue_s as queue, ttft_s as ttft, tpot_s as tpot, e2e_s as e2e
    from int_analysis_requests
    where in_window and ok
),

long as (
    unpivot requests on queue, ttft, tpot, e2e into name metric value seconds
),

final as (
    select deployment, model, metric, count(*) as requests, quantile_cont(seconds, $quantiles::double[]) as q
    from long
    group by all
)

select * from final
order by deployment, model, metric
