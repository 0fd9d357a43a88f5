-- Question: (request by request) how many requests gave each of prompt, output and cached length per group,
--   how many tokens, and what are the mean and the percentiles of those lengths?
-- Grain: one row per (grp, metric) among the requests of int_analysis_requests in the window.
-- Parameters: $quantiles (DOUBLE[] of fractions); reads int_analysis_requests.
-- Columns: grp, metric, requests, tokens, mean (avg), q (quantile_cont of the lengths, in the order of
--   $quantiles), max.
-- Oracle: a test reference for queries/length_stats_from_counts.sql with attribution.analyses.lengths'
--   interpolation (the product path, which reads the lengths counted per (grp, metric, length));
--   tests/test_lengths.py compares the two bit for bit. The product never runs this file.
with

long as (
    select grp, 'prompt_tokens' as metric, prompt_tokens as length
    from int_analysis_requests where in_window and prompt_tokens is not null
    union all
    select grp, 'output_tokens', output_tokens from int_analysis_requests where in_window and output_tokens is not null
    union all
    select grp, 'cached_tokens', cached_tokens from int_analysis_requests where in_window and cached_tokens is not null
),

final as (
    select
        grp,
        metric,
        count(*) as requests,
        sum(length)::bigint as tokens,
        avg(length) as mean,
        quantile_cont(length, $quantiles::double[]) as q,
        max(length) as max
    from long
    group by grp, metric
)

select * from final
order by grp, metric
