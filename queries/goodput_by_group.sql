-- Question: how many requests per second met every term of a joint SLO (goodput), and what share of the traffic is that?
-- Grain: one row per grp.
-- Parameters: $slo_metrics (VARCHAR[]: queue, ttft, tpot, e2e), $slo_limits (DOUBLE[], seconds, same order).
-- Columns: grp, requests, failed (error / failed / aborted: never good), unmeasured (completed, but a term's phase
--   is unknown), judged (requests - unmeasured: the failed ones and the completed ones with every term known),
--   good (completed and every term <= its limit), good_share_of_judged_requests (good / judged),
--   span_s (first to last arrival of the whole selection, every group), requests_per_s, goodput_per_s
--   (good / span_s). A request with one output token has no TPOT and meets any TPOT term.
-- Not transpiled: `list_zip` read by position `t[1]` (Spark's arrays_zip makes named fields) and the list
--   comprehension `for t in` (sqlglot writes ARRAY(t FOR t IN ...), which Spark does not parse): on Spark
--   transform and filter over the terms' index; tests/test_spark.py checks the two agree.
with

requests as (
    select * from int_analysis_requests where in_window
),

span as (
    select (max(t_arrival) - min(t_arrival)) / 1e6 as span_s from requests
),

-- @duckdb
terms as (
    select list_zip($slo_metrics::varchar[], $slo_limits::double[]) as terms
),

-- @end
judged as (
    select
        grp,
        ok,
-- @duckdb
        [
            case t[1]
-- @spark
        transform($slo_metrics::varchar[], (m, i) ->
            case m
-- @end
                when 'queue' then queue_s
                when 'ttft' then ttft_s
                when 'tpot' then case when output_tokens <= 1 then 0.0 else tpot_s end
                when 'e2e' then e2e_s
-- @duckdb
            end <= t[2]
            for t in terms
        ] as met
    from requests, terms
-- @spark
            end <= element_at($slo_limits::double[], i + 1)
        ) as met
    from requests
-- @end
),

counted as (
    select
        grp,
        ok,
-- @duckdb
        len([m for m in met if m]) as n_met,
        len([m for m in met if not m]) as n_missed,
        len(met) as n_terms
-- @spark
        size(filter(met, m -> m)) as n_met,
        size(filter(met, m -> not m)) as n_missed,
        size(met) as n_terms
-- @end
    from judged
),

final as (
    select
        grp,
        count(*) as requests,
        count(*) filter (where not ok) as failed,
        count(*) filter (where ok and n_missed = 0 and n_met < n_terms) as unmeasured,
        count(*) - count(*) filter (where ok and n_missed = 0 and n_met < n_terms) as judged,
        count(*) filter (where ok and n_met = n_terms) as good,
        count(*) filter (where ok and n_met = n_terms)
            / nullif(count(*) - count(*) filter (where ok and n_missed = 0 and n_met < n_terms), 0)
            as good_share_of_judged_requests,
        any_value(span_s) as span_s,
        count(*) / nullif(any_value(span_s), 0) as requests_per_s,
        count(*) filter (where ok and n_met = n_terms) / nullif(any_value(span_s), 0) as goodput_per_s
    from counted, span
    group by grp
)

select * from final
order by grp = '(none)', grp
