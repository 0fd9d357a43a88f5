-- Question: how does each group score on a per-request latency score (e.g. the contest score ERS)?
-- Grain: one row per grp.
-- Parameters: $score_metrics (VARCHAR[]: queue, ttft, tpot, e2e), $score_best, $score_worst (DOUBLE[], seconds),
--   $score_weights, $score_powers (DOUBLE[]), $score_scale (DOUBLE).
-- Columns: grp, requests, scored (failed requests score 0; completed ones need every term's phase), mean, p10, p50,
--   p90 (quantile_cont), zero_share (share of scored requests scoring 0).
--   score = scale * sum(weight * clip((worst - x) / (worst - best), 0, 1) ^ power): a term earns its full weight
--   at or below `best`, nothing at or above `worst`; the clipping keeps the square from rewarding x > worst.
--   A request with one output token has no TPOT and earns a TPOT term in full.
-- Engine: the Spark form of queries/score_by_group.sql (Spark SQL: list comprehensions and list_sum as
--   transform, filter and aggregate); tests/test_spark.py checks the two agree.
-- Dialect: spark
-- Not transpiled: `list_zip` read by position, the list comprehensions `for t in terms` and `list_sum`
--   (no Spark text from sqlglot for any of them).
with

requests as (
    select * from int_analysis_requests where in_window
),

valued as (
    select
        grp,
        ok,
        transform(cast(:score_metrics as array<string>), (m, i) -> named_struct(
            'f', (element_at(cast(:score_worst as array<double>), i + 1) - case m
                    when 'queue' then queue_s
                    when 'ttft' then ttft_s
                    when 'tpot' then case when output_tokens <= 1 then 0.0 else tpot_s end
                    when 'e2e' then e2e_s
                end) / (element_at(cast(:score_worst as array<double>), i + 1)
                        - element_at(cast(:score_best as array<double>), i + 1)),
            'w', element_at(cast(:score_weights as array<double>), i + 1),
            'p', element_at(cast(:score_powers as array<double>), i + 1)
        )) as parts
    from requests
),

scored as (
    select
        grp,
        case
            when not ok then 0.0
            when size(filter(parts, x -> x.f is null)) = 0 then :score_scale * aggregate(
                parts, cast(0 as double),
                (acc, x) -> acc + x.w * pow(case when x.f < 0 then 0.0 when x.f > 1 then 1.0 else x.f end, x.p)
            )
        end as score
    from valued
),

final as (
    select
        grp,
        count(*) as requests,
        count(score) as scored,
        avg(score) as mean,
        percentile(score, 0.1) as p10,
        percentile(score, 0.5) as p50,
        percentile(score, 0.9) as p90,
        avg(cast(score = 0 as integer)) as zero_share
    from scored
    group by grp
)

select * from final
order by grp = '(none)', grp
