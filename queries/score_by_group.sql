-- Question: how does each group score on a per-request latency score (e.g. the contest score ERS)?
-- Grain: one row per grp.
-- Parameters: $score_metrics (VARCHAR[]: queue, ttft, tpot, e2e), $score_best, $score_worst (DOUBLE[], seconds),
--   $score_weights, $score_powers (DOUBLE[]), $score_scale (DOUBLE).
-- Columns: grp, requests, scored (failed requests score 0; completed ones need every term's phase), mean, p10, p50,
--   p90 (quantile_cont), zero_share (share of scored requests scoring 0).
--   score = scale * sum(weight * clip((worst - x) / (worst - best), 0, 1) ^ power): a term earns its full weight
--   at or below `best`, nothing at or above `worst`; the clipping keeps the square from rewarding x > worst.
--   A request with one output token has no TPOT and earns a TPOT term in full.
-- Not transpiled: `list_zip` read by position, the list comprehensions `for t in terms` and `list_sum` (no
--   Spark text from sqlglot for any of them): on Spark transform, filter and aggregate over the terms' index;
--   tests/test_spark.py checks the two agree.
with

requests as (
    select * from int_analysis_requests where in_window
),

-- @duckdb
terms as (
    select list_zip(
        $score_metrics::varchar[], $score_best::double[], $score_worst::double[], $score_weights::double[],
        $score_powers::double[]
    ) as terms
),

-- @end
valued as (
    select
        grp,
        ok,
-- @duckdb
        [
            {
                f: (t[3] - case t[1]
-- @spark
        transform($score_metrics::varchar[], (m, i) -> named_struct(
            'f', (element_at($score_worst::double[], i + 1) - case m
-- @end
                    when 'queue' then queue_s
                    when 'ttft' then ttft_s
                    when 'tpot' then case when output_tokens <= 1 then 0.0 else tpot_s end
                    when 'e2e' then e2e_s
-- @duckdb
                end) / (t[3] - t[2]),
                w: t[4],
                p: t[5]
            }
            for t in terms
        ] as parts
    from requests, terms
-- @spark
                end) / (element_at($score_worst::double[], i + 1) - element_at($score_best::double[], i + 1)),
            'w', element_at($score_weights::double[], i + 1),
            'p', element_at($score_powers::double[], i + 1)
        )) as parts
    from requests
-- @end
),

scored as (
    select
        grp,
        case
            when not ok then 0.0
-- @duckdb
            when len([x for x in parts if x.f is null]) = 0 then $score_scale * list_sum([
                x.w * pow(case when x.f < 0 then 0.0 when x.f > 1 then 1.0 else x.f end, x.p) for x in parts
            ])
-- @spark
            when size(filter(parts, x -> x.f is null)) = 0 then $score_scale * aggregate(
                parts, cast(0 as double),
                (acc, x) -> acc + x.w * pow(case when x.f < 0 then 0.0 when x.f > 1 then 1.0 else x.f end, x.p)
            )
-- @end
        end as score
    from valued
),

final as (
    select
        grp,
        count(*) as requests,
        count(score) as scored,
        avg(score) as mean,
        quantile_cont(score, 0.1) as p10,
        quantile_cont(score, 0.5) as p50,
        quantile_cont(score, 0.9) as p90,
        avg((score = 0)::integer) as zero_share
    from scored
    group by grp
)

select * from final
order by grp = '(none)', grp
