-- Question: how many requests per second met every term of a joint SLO (goodput), what share of the traffic is
--   that, and which term do requests miss (the share of completed requests meeting each term alone)?
-- Grain: one row per grp with level 'group' (goodput), then one per (grp, term) with level 'term': the two
--   questions in one pass over the selection's judged requests, split by `level` (analyses/latency.py).
-- Parameters: $slo_metrics (VARCHAR[]: queue, ttft, tpot, e2e), $slo_limits (DOUBLE[], seconds, same order).
-- Columns: level ('group' or 'term'); at level 'group': grp, requests, failed (error / failed / aborted: never
--   good), unmeasured (completed, but a term's phase is unknown), judged (requests - unmeasured: the failed ones
--   and the completed ones with every term known), good (completed and every term <= its limit),
--   good_share_of_judged_requests (good / judged), span_s (first to last arrival of the whole selection, every
--   group), requests_per_s, goodput_per_s (good / span_s); at level 'term': grp, term, limit_s, measured (completed
--   requests whose source gave that phase), met, met_share; the other level's columns NULL. A request with one
--   output token has no TPOT and meets any TPOT term.
-- Not transpiled: `list_zip` read by position `t[1]` (Spark's arrays_zip makes named fields), the list
--   comprehension `for t in` (sqlglot writes ARRAY(t FOR t IN ...), which Spark does not parse) and two `unnest`
--   side by side in one select (DuckDB pairs them by position; Spark allows one generator per select): on Spark
--   transform and filter over the terms' index, posexplode and element_at; tests/test_spark.py checks the two agree.
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
-- each term with its limit and its place in the list (1-based)
term_list as (
-- @duckdb
    select
        unnest($slo_metrics::varchar[]) as term,
        unnest($slo_limits::double[]) as limit_s,
        unnest(range(1, len($slo_metrics::varchar[]) + 1)) as pos
-- @spark
    select term, element_at($slo_limits::double[], pos + 1) as limit_s, pos + 1 as pos
    from (select posexplode($slo_metrics::varchar[]) as (pos, term))
-- @end
),

-- per request, each term met (true), missed (false) or unknown (NULL: the source lacks the phase)
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

goodput as (
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
),

-- completed requests only: each term alone
term_met as (
    select
        grp,
        term,
        limit_s,
-- @duckdb
        met[pos] as m
-- @spark
        element_at(met, pos) as m
-- @end
    from judged, term_list
    where ok
),

slo_terms as (
    select
        grp, term, limit_s,
        count(m) as measured,
        count(*) filter (where m) as met,
        count(*) filter (where m) / nullif(count(m), 0) as met_share
    from term_met
    group by grp, term, limit_s
),

final as (
    select
        'group' as level, grp, requests, failed, unmeasured, judged, good, good_share_of_judged_requests, span_s,
        requests_per_s, goodput_per_s, cast(null as varchar) as term, cast(null as double) as limit_s,
        cast(null as bigint) as measured, cast(null as bigint) as met, cast(null as double) as met_share
    from goodput
    union all
    select
        'term' as level, grp, cast(null as bigint) as requests, cast(null as bigint) as failed,
        cast(null as bigint) as unmeasured, cast(null as bigint) as judged, cast(null as bigint) as good,
        cast(null as double) as good_share_of_judged_requests, cast(null as double) as span_s,
        cast(null as double) as requests_per_s, cast(null as double) as goodput_per_s, term, limit_s, measured,
        met, met_share
    from slo_terms
)

select * from final
order by level = 'term', grp = '(none)', grp, list_position(['queue', 'ttft', 'tpot', 'e2e'], term)
