-- Issue 21 goal 2: one DuckDB query per CLI analysis computing its core answer from the store's Parquet.
-- `{requests}` is replaced by the list of the store's live `requests` files. Each query starts with
-- `-- name: <command>`; the runner runs one per process. The engine x gateway join is part of each query
-- (the CLI's commands read it too: from joincache once it is built, see run.py's `cold` figures).

-- name: joined
-- (not a command: the join every query below starts from, kept here once; `{joined}` in the queries)
with r as (select * from read_parquet({requests})),
e as (select * from r where source_kind = 'engine' and request_key is not null),
g as (select * from r where source_kind = 'gateway' and request_key is not null)
select coalesce(e.deployment, g.deployment) as deployment,
       coalesce(g.key_alias, g.team, 'key-' || left(g.key_hash, 12), g.workload, e.model, g.model) as workload,
       coalesce(e.arrival, g.arrival) as arrival, e.queue_s, coalesce(e.ttft_s, g.ttft_s) as ttft_s,
       coalesce(e.tpot_s, g.tpot_s) as tpot_s, coalesce(e.e2e_s, g.e2e_s) as e2e_s,
       coalesce(e.prompt_tokens, g.prompt_tokens) as prompt_tokens,
       coalesce(e.output_tokens, g.output_tokens) as output_tokens,
       coalesce(e.cached_tokens, g.cached_tokens) as cached_tokens, e.engine
from e full outer join g using (request_key)

-- name: lengths
-- exact quantiles (quantile_cont) of prompt, output and cached tokens per workload
select workload, metric, count(*) as requests, sum(v) as tokens, avg(v) as mean,
       quantile_cont(v, [0.5, 0.9, 0.95, 0.99, 0.999]) as q, max(v) as max
from (unpivot ({joined}) on prompt_tokens, output_tokens, cached_tokens into name metric value v)
group by all order by all

-- name: latency
-- exact quantiles of queue, ttft, tpot and e2e seconds per workload
select workload, metric, count(*) as requests, avg(v) as mean,
       quantile_cont(v, [0.5, 0.9, 0.95, 0.99, 0.999]) as q, max(v) as max
from (unpivot ({joined}) on queue_s, ttft_s, tpot_s, e2e_s into name metric value v)
group by all order by all

-- name: concurrency
-- the in-system sweep per deployment as a window function: +1 at arrival, -1 at arrival + e2e_s (half-open);
-- peak, time-weighted mean and the time-weighted p50/p99 of the count
with j as ({joined}),
ev as (
    select deployment, arrival as t, 1 as d from j where e2e_s is not null
    union all
    select deployment, arrival + to_microseconds((e2e_s * 1e6)::bigint), -1 from j where e2e_s is not null
),
c as (
    select deployment, t, sum(d) over (partition by deployment order by t, d rows unbounded preceding) as n,
           epoch(lead(t) over (partition by deployment order by t, d) - t) as dur
    from ev
),
s as (
    select deployment, n, sum(dur) as dur from c where dur is not null group by all
),
cum as (
    select deployment, n, sum(dur) over (partition by deployment order by n) / sum(dur) over (partition by deployment)
           as f from s
)
select deployment, max(n) as peak, sum(n * dur) / sum(dur) as mean,
       (select min(n) from cum where cum.deployment = s.deployment and f >= 0.5) as p50,
       (select min(n) from cum where cum.deployment = s.deployment and f >= 0.99) as p99
from s group by all order by all

-- name: thresholds
-- the threshold counts: requests over each catalogue threshold the sample store shows, per engine, and the
-- step-scoped counts (lines over a batch-size / batch-token threshold, their time to the next line of the
-- file capped at 60 s, per deployment), as the command reports both
with req as (
    select engine, count(*) as requests, sum(prompt_tokens) as prompt_tokens,
           count(*) filter (where prompt_tokens > 0) as over_0,
           count(*) filter (where prompt_tokens >= 16) as ge_16,
           count(*) filter (where prompt_tokens >= 256) as ge_256,
           count(*) filter (where prompt_tokens - coalesce(cached_tokens, 0) > 8192) as uncached_over_8192,
           count(*) filter (where prompt_tokens - coalesce(cached_tokens, 0) > 16384) as uncached_over_16384,
           count(*) filter (where prompt_tokens >= 32768) as ge_32768,
           count(*) filter (where prompt_tokens > 95000) as over_95000,
           count(*) filter (where prompt_tokens > 131072) as over_131072,
           sum(prompt_tokens) filter (where prompt_tokens - coalesce(cached_tokens, 0) > 8192) as tokens_over_8192
    from ({joined}) group by all
),
lines as (
    select deployment, kind, running, new_tokens, batch_tokens,
           least(epoch(lead(ts) over (partition by file order by ts, line) - ts), 60) as dt
    from read_parquet({engine_steps}) where ts is not null
),
steps as (
    select deployment, count(*) as rows,
           count(*) filter (where kind = 'decode' and running > 256) as decode_over_256,
           sum(dt) filter (where kind = 'decode' and running > 256) as decode_over_256_s,
           count(*) filter (where kind = 'prefill' and new_tokens > 8192) as prefill_over_8192,
           sum(dt) filter (where kind = 'prefill' and new_tokens > 8192) as prefill_over_8192_s,
           count(*) filter (where coalesce(batch_tokens, new_tokens) > 16384) as step_over_16384,
           max(running) as max_running
    from lines group by all
)
select * from req, steps order by all

-- name: capacity
-- completed requests per day and the busiest hour per deployment, and the median service time
with j as (select * from ({joined}) where e2e_s is not null),
h as (select deployment, date_trunc('hour', arrival) as hr, count(*) as n from j group by all),
d as (select deployment, count(*) as n, quantile_cont(e2e_s, 0.5) as service_s, min(arrival) as t0,
             max(arrival) as t1 from j group by all)
select d.deployment, any_value(d.n) / greatest(epoch(any_value(d.t1) - any_value(d.t0)) / 86400.0, 1.0 / 24)
           as completed_per_day,
       max(h.n) * 24 as busiest_hour_per_day, any_value(d.service_s) as service_s
from d join h using (deployment) group by all order by all
