-- Question: how long does each phase of a request take per group (queueing, time to first token, time per output
--   token, end to end), and per group and prompt-length bucket (long prompts wait and prefill longer)?
-- Grain: one row per (grp, metric) with level 'group' (completed requests whose source gave that phase), then one
--   per (grp, bucket, metric) with level 'bucket' and at least one request (those of them with a prompt length):
--   the two questions in one pass over the selection (grouping sets), split by `level` (analyses/latency.py).
-- Parameters: $bucket_edges (BIGINT[], ascending lower edges of the buckets after the first, e.g.
--   [256, 1024, 4096, 16384, 65536]: buckets <256, 256-1023, ..., 65536+); $quantiles (DOUBLE[] of fractions,
--   e.g. [0.5, 0.9, 0.95, 0.99, 0.999]).
-- Columns: level ('group' or 'bucket'), grp, bucket (label; NULL at level 'group'), bucket_lo, bucket_hi
--   (prompt_tokens in [bucket_lo, bucket_hi); hi NULL = open; both NULL at level 'group'), metric (queue_s, ttft_s,
--   tpot_s, e2e_s), requests, mean, q (the $quantiles of the seconds, in order: exact percentiles, quantile_cont =
--   linear interpolation, numpy's default), max (seconds).
-- Not transpiled: the list comprehension `for x in e` (sqlglot writes ARRAY(x FOR x IN ...), which Spark does
--   not parse) and the 1-based index `e[b]` with a computed index (sqlglot shifts literal indexes only; Spark's
--   [] is 0-based): on Spark filter and element_at; tests/test_spark.py checks the two agree.
with

requests as (
    select * from int_analysis_requests where in_window and ok
),

edges as (
    select $bucket_edges::bigint[] as e
),

bucketed as (
-- @duckdb
    select requests.*, len([x for x in e if x <= prompt_tokens]) as b, e
-- @spark
    select requests.*, size(filter(e, x -> x <= prompt_tokens)) as b, e
-- @end
    from requests, edges
),

labelled as (
    select
        *,
-- @duckdb
        case when prompt_tokens is null then null when b = 0 then 0 else e[b] end as bucket_lo,
        case when prompt_tokens is not null and b < len(e) then e[b + 1] end as bucket_hi
-- @spark
        case when prompt_tokens is null then null when b = 0 then 0 else element_at(e, b) end as bucket_lo,
        case when prompt_tokens is not null and b < size(e) then element_at(e, b + 1) end as bucket_hi
-- @end
    from bucketed
),

long as (
    unpivot (select grp, bucket_lo, bucket_hi, queue_s, ttft_s, tpot_s, e2e_s from labelled)
    on queue_s, ttft_s, tpot_s, e2e_s
    into name metric value seconds
),

stats as (
    select
        case when grouping(bucket_lo) = 0 then 'bucket' else 'group' end as level,
        grp, bucket_lo, bucket_hi, metric,
        count(*) as requests,
        avg(seconds) as mean,
        quantile_cont(seconds, $quantiles::double[]) as q,
        max(seconds) as max
    from long
    group by grouping sets ((grp, metric), (grp, bucket_lo, bucket_hi, metric))
),

final as (
    select
        level,
        grp,
        case when level = 'group' then null
             when bucket_lo = 0 then '<' || bucket_hi
             when bucket_hi is null then bucket_lo || '+'
             else bucket_lo || '-' || (bucket_hi - 1) end as bucket,
        bucket_lo, bucket_hi, metric, requests, mean, q, max
    from stats
    -- (a request without a prompt length is in its group's rows, in no bucket)
    where level = 'group' or bucket_lo is not null
)

select * from final
order by level = 'bucket', grp = '(none)', grp, bucket_lo, list_position(['queue_s', 'ttft_s', 'tpot_s', 'e2e_s'], metric)
