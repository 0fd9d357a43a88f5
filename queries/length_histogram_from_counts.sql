-- Question: length_histogram_by_group.sql's answer, from counted lengths (int_length_counts.sql) instead of
--   one row per request (the first look's merge of per-day counts, summaries/days.py).
-- Grain: one row per (grp, metric, bin) holding at least one request, as length_histogram_by_group.sql.
-- Parameters: $bins_per_decade (INTEGER); reads int_length_counts.
-- Columns: those of length_histogram_by_group.sql.
with

counts as (
    select * from int_length_counts
),

binned as (
    select
        grp,
        metric,
        length,
        n,
        -- as length_histogram_by_group.sql (the 1e-9 keeps exact powers of ten in their own bin)
        case when length <= 0 then -1 else floor(log10(length) * $bins_per_decade + 1e-9)::integer end as bin
    from counts
),

counted as (
    select grp, metric, bin, sum(n)::bigint as requests, sum(length * n)::bigint as tokens
    from binned
    group by all
),

final as (
    select
        grp,
        metric,
        bin,
        case when bin < 0 then 0 else ceil(pow(10, bin / $bins_per_decade))::bigint end as lo,
        case when bin < 0 then 1 else ceil(pow(10, (bin + 1) / $bins_per_decade))::bigint end as hi,
        requests,
        tokens,
        requests / sum(requests) over g as request_share,
        tokens / nullif(sum(tokens) over g, 0) as token_share,
        sum(requests) over (g order by bin) / sum(requests) over g as cum_request_share,
        sum(tokens) over (g order by bin) / nullif(sum(tokens) over g, 0) as cum_token_share
    from counted
    window g as (partition by grp, metric)
)

select * from final
order by grp = '(none)', grp, list_position(['prompt_tokens', 'output_tokens', 'cached_tokens'], metric), bin
