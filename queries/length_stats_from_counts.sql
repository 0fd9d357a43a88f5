-- Question: how long are prompts, outputs and cached prefixes per group, counted by requests and by tokens?
-- Grain: one row per (grp, metric); metric is prompt_tokens, output_tokens or cached_tokens.
-- Parameters: $quantiles (DOUBLE[] of fractions); reads int_length_counts, the requests counted per (grp, metric,
--   length): the window's (int_request_length_counts.sql, behind that name as a temporary view) or the per-day
--   counts' (int_length_counts.sql).
-- Columns: grp, metric, requests (requests whose source gave the count), tokens (their sum), mean (exactly
--   DuckDB's avg over the requests), q_lo, q_hi (the order statistics at floor and ceil of (requests - 1) *
--   quantile) and q_rn ((requests - 1) * quantile), per quantile of $quantiles in order, which
--   attribution.analyses.lengths interpolates into DuckDB's quantile_cont bit for bit (tests/test_lengths.py
--   compares with tests/oracle/length_stats_per_request.sql), max, tok_p50, tok_p90, tok_p95, tok_p99
--   (token-weighted: the smallest length L such that requests of length <= L hold at least that share of the
--   tokens), top1_token_share (share of the tokens in the longest 1% of requests, ceil(requests / 100) of them).
-- Not transpiled: the mean's `::hugeint` (Spark has no such type: there the sums divide as DOUBLE), the two
--   `unnest` in one select (Spark allows one generator there) and the ordered list aggregate
--   `list(lo order by i)` (sqlglot drops the order): on Spark the quantile's index from sequence and
--   element_at, the ordered lists from a sorted collect_list of structs; tests/test_spark.py checks the two agree.
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
-- @duckdb
        sum(length * n)::hugeint / sum(n) as mean,
-- @spark
        sum(length * n) / sum(n) as mean,
-- @end
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
-- @duckdb
    select unnest($quantiles::double[]) as quantile, unnest(range(len($quantiles::double[]))) as i
-- @spark
    select element_at(qs, i + 1) as quantile, i
    from (select qs, explode(sequence(0, size(qs) - 1)) as i from (select $quantiles::double[] as qs))
-- @end
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
-- @duckdb
    select grp, metric, list(lo order by i) as q_lo, list(hi order by i) as q_hi, list(rn order by i) as q_rn
-- @spark
    select
        grp,
        metric,
        transform(array_sort(collect_list(struct(i, lo))), x -> x.lo) as q_lo,
        transform(array_sort(collect_list(struct(i, hi))), x -> x.hi) as q_hi,
        transform(array_sort(collect_list(struct(i, rn))), x -> x.rn) as q_rn
-- @end
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
