-- Question: length_stats_by_group.sql's answer, from counted lengths (int_length_counts.sql) instead of one row
--   per request: the first look merges per-day counts (summaries/days.py) without reading every request.
-- Grain: one row per (grp, metric), as length_stats_by_group.sql.
-- Parameters: $quantiles (DOUBLE[] of fractions); reads int_length_counts.
-- Columns: those of length_stats_by_group.sql, except q: in its place q_lo, q_hi (the order statistics at
--   floor and ceil of (requests - 1) * quantile) and q_rn ((requests - 1) * quantile), per quantile in order,
--   which summaries/days.py interpolates as DuckDB's quantile_cont does (bit for bit; tests/test_summary_days.py).
with

counts as (
    select * from int_length_counts
),

ranked as (
    select
        *,
        -- requests no longer than this length (order statistics), and their tokens
        sum(n) over (partition by grp, metric order by length) as cum_n,
        sum(length * n) over (partition by grp, metric order by length) as cum_tokens,
        sum(length * n) over (partition by grp, metric) as total_tokens,
        -- requests strictly longer than this length, and all of them
        sum(n) over (partition by grp, metric order by length desc) - n as longer,
        sum(n) over (partition by grp, metric) as total_n
    from counts
),

stats as (
    select
        grp,
        metric,
        sum(n)::bigint as requests,
        sum(length * n)::bigint as tokens,
        sum(length * n)::hugeint / sum(n) as mean,
        max(length) as max,
        min(length) filter (where cum_tokens >= 0.5 * total_tokens) as tok_p50,
        min(length) filter (where cum_tokens >= 0.9 * total_tokens) as tok_p90,
        min(length) filter (where cum_tokens >= 0.95 * total_tokens) as tok_p95,
        min(length) filter (where cum_tokens >= 0.99 * total_tokens) as tok_p99,
        -- the longest ceil(n / 100) requests: of each length, those not already counted among longer ones
        sum(length * least(n, greatest(ceil(total_n / 100)::bigint - longer, 0)))
            / nullif(sum(length * n), 0) as top1_token_share
    from ranked
    group by grp, metric
),

wanted as (
    select unnest($quantiles::double[]) as quantile, unnest(range(len($quantiles::double[]))) as i
),

positions as (
    select grp, metric, i, (any_value(total_n) - 1)::double * quantile as rn
    from ranked cross join wanted
    group by grp, metric, i, quantile
),

order_stats as (
    select
        p.grp, p.metric, p.i, p.rn,
        min(r.length) filter (where r.cum_n > floor(p.rn)) as lo,
        min(r.length) filter (where r.cum_n > ceil(p.rn)) as hi
    from positions as p
    join ranked as r on r.grp = p.grp and r.metric = p.metric
    group by p.grp, p.metric, p.i, p.rn
),

quantiles as (
    select grp, metric, list(lo order by i) as q_lo, list(hi order by i) as q_hi, list(rn order by i) as q_rn
    from order_stats
    group by grp, metric
),

final as (
    select
        s.grp, s.metric, requests, tokens, mean,
        q_lo, q_hi, q_rn, max,
        case when tokens > 0 then tok_p50 end as tok_p50,
        case when tokens > 0 then tok_p90 end as tok_p90,
        case when tokens > 0 then tok_p95 end as tok_p95,
        case when tokens > 0 then tok_p99 end as tok_p99,
        top1_token_share
    from stats as s
    join quantiles as q on q.grp = s.grp and q.metric = s.metric
)

select * from final
order by grp = '(none)', grp, list_position(['prompt_tokens', 'output_tokens', 'cached_tokens'], metric)
