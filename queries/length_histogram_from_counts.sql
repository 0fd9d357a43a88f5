-- Question: how are prompt, output and cached lengths distributed per group, on log-spaced bins for charts?
-- Grain: one row per (grp, metric, bin) holding at least one request; bins are $bins_per_decade per power of
--   ten: bin i holds lengths L with i <= bins_per_decade * log10(L) < i + 1; lengths of 0 get bin -1.
-- Parameters: $bins_per_decade (INTEGER, e.g. 10); reads int_length_counts, the requests counted per (grp,
--   metric, length), as length_stats_from_counts.sql.
-- Columns: grp, metric, bin, lo, hi (the integer lengths in the bin are lo <= L < hi), requests, tokens,
--   request_share, token_share (of the group's requests and tokens for that metric: the count-weighted and
--   the token-weighted views), cum_request_share, cum_token_share (up to and including the bin).
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
        -- the 1e-9 keeps exact powers of ten in their own bin; integers below 1e8 are never that close to an edge
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
