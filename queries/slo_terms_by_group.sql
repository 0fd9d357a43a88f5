-- Question: which term of a joint SLO do requests miss: the share of completed requests meeting each term alone.
-- Grain: one row per (grp, term).
-- Parameters: $slo_metrics (VARCHAR[]: queue, ttft, tpot, e2e), $slo_limits (DOUBLE[], seconds, same order).
-- Columns: grp, term, limit_s, measured (completed requests whose source gave that phase), met, met_share.
--   A request with one output token has no TPOT and meets any TPOT term.
-- Not transpiled: two `unnest` side by side in one select (DuckDB pairs them by position; Spark allows one
--   generator per select): on Spark posexplode and element_at; tests/test_spark.py checks the two agree.
with

requests as (
    select * from int_analysis_requests where in_window and ok
),

terms as (
-- @duckdb
    select unnest($slo_metrics::varchar[]) as term, unnest($slo_limits::double[]) as limit_s
-- @spark
    select term, element_at($slo_limits::double[], pos + 1) as limit_s
    from (select posexplode($slo_metrics::varchar[]) as (pos, term))
-- @end
),

judged as (
    select
        grp,
        term,
        limit_s,
        case term
            when 'queue' then queue_s
            when 'ttft' then ttft_s
            when 'tpot' then case when output_tokens <= 1 then 0.0 else tpot_s end
            when 'e2e' then e2e_s
        end as value
    from requests, terms
),

final as (
    select
        grp, term, limit_s,
        count(value) as measured,
        count(*) filter (where value <= limit_s) as met,
        count(*) filter (where value <= limit_s) / nullif(count(value), 0) as met_share
    from judged
    group by grp, term, limit_s
)

select * from final
order by grp = '(none)', grp, list_position(['queue', 'ttft', 'tpot', 'e2e'], term)
