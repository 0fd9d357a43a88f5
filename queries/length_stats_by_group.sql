-- Question: how long are prompts, outputs and cached prefixes per group, counted by requests and by tokens?
-- Grain: one row per (grp, metric); metric is prompt_tokens, output_tokens or cached_tokens.
-- Parameters: $quantiles (DOUBLE[] of fractions); reads int_request_lengths (queries/int_request_lengths.sql).
-- Columns: grp, metric, requests (rows where the source gave the count), tokens (their sum), mean, q (the
--   $quantiles, request-weighted; exact, quantile_cont = linear interpolation, numpy's default), max,
--   tok_p50, tok_p90, tok_p95, tok_p99 (token-weighted: the smallest length L such that requests of length <= L hold at
--   least that share of the tokens), top1_token_share (share of the tokens in the longest 1% of requests,
--   ceil(requests / 100) of them).
with

long as (
    select * from int_request_lengths
),

stats as (
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
),

-- the token-weighted figures need the lengths in order: one row per distinct length is enough (and far
-- cheaper to order than one row per request)
by_length as (
    select grp, metric, length, count(*) as n_length, sum(length) as tokens_length
    from long
    group by grp, metric, length
),

ranked as (
    select
        *,
        -- tokens of the requests no longer than this length
        sum(tokens_length) over (partition by grp, metric order by length) as cum_tokens,
        sum(tokens_length) over (partition by grp, metric) as total_tokens,
        -- requests strictly longer than this length, and all of them
        sum(n_length) over (partition by grp, metric order by length desc) - n_length as longer,
        sum(n_length) over (partition by grp, metric) as n
    from by_length
),

weighted as (
    select
        grp,
        metric,
        min(length) filter (where cum_tokens >= 0.5 * total_tokens) as tok_p50,
        min(length) filter (where cum_tokens >= 0.9 * total_tokens) as tok_p90,
        min(length) filter (where cum_tokens >= 0.95 * total_tokens) as tok_p95,
        min(length) filter (where cum_tokens >= 0.99 * total_tokens) as tok_p99,
        -- the longest ceil(n / 100) requests: of each length, those not already counted among longer ones
        sum(length * least(n_length, greatest(ceil(n / 100)::bigint - longer, 0)))
            / nullif(sum(tokens_length), 0) as top1_token_share
    from ranked
    group by grp, metric
),

final as (
    select
        s.grp, s.metric, requests, tokens, mean,
        q, max,
        case when tokens > 0 then tok_p50 end as tok_p50,
        case when tokens > 0 then tok_p90 end as tok_p90,
        case when tokens > 0 then tok_p95 end as tok_p95,
        case when tokens > 0 then tok_p99 end as tok_p99,
        top1_token_share
    from stats as s
    join weighted as w on w.grp = s.grp and w.metric = s.metric
)

select * from final
order by grp = '(none)', grp, list_position(['prompt_tokens', 'output_tokens', 'cached_tokens'], metric)
