-- Question: per engine start, how often and for how long did the running cap bind with requests waiting while
--   the KV pool had room, and how much queueing did that cost?
-- Grain: one row per start of the temporary table int_memsplit_starts that has step lines; reads int_memsplit_lines,
--   int_memsplit_episodes and joined_requests.
-- Parameters: none.
-- Columns: start_id, deployment, ranks (engines with lines), lines, span_s (first to last line), observed_s
--   (sum of line weights), at_cap_lines, queued_lines, at_cap_queued_lines, binding_lines, kv_bound_lines;
--   at_cap_s, queued_s, binding_s, kv_bound_s (sums of line weights); binding_share (binding_s / (span_s x
--   ranks)); episodes, longest_episode_s; waiting_request_s (sum of waiting x weight over all lines: request-
--   seconds of queueing), binding_waiting_request_s, kv_bound_waiting_request_s, below_cap_waiting_request_s
--   (the same over binding lines, KV-bound lines, and queued lines below the cap that are not KV-bound: what
--   each limit cost); kv_usage_median_at_cap,
--   kv_usage_median_binding, kv_usage_mean_queued (plain median / mean over those lines),
--   state_usage_median_at_cap; requests (arriving in the period), requests_with_queue (queue_s known),
--   queue_s_sum, queue_p50, queue_p99 (over those), episode_requests (arriving inside an episode),
--   episode_queue_s_sum, episode_queue_p50, episode_queue_p99 (queue_s of those; quantile_cont, linear).
-- Not transpiled: the `asof left join` of each arrival to its episode span (Spark SQL has no ASOF join and
--   sqlglot does not rewrite one): on Spark a range join on [began, ended) (the spans of a start do not
--   overlap, so at most one matches); DuckDB SQL too, tests/test_spark.py checks the two agree.
with

starts as (
    select * from int_memsplit_starts
),

lines as (
    select * from int_memsplit_lines
),

episodes as (
    select * from int_memsplit_episodes
),

by_line as (
    select
        start_id,
        count(distinct rank) as ranks,
        count(*) as lines,
        (epoch_us(max(ts)) - epoch_us(min(ts))) / 1e6 as span_s,
        sum(w_s) as observed_s,
        count(*) filter (where at_cap) as at_cap_lines,
        count(*) filter (where queued) as queued_lines,
        count(*) filter (where at_cap and queued) as at_cap_queued_lines,
        count(*) filter (where binding) as binding_lines,
        count(*) filter (where kv_bound) as kv_bound_lines,
        coalesce(sum(w_s) filter (where at_cap), 0) as at_cap_s,
        coalesce(sum(w_s) filter (where queued), 0) as queued_s,
        coalesce(sum(w_s) filter (where binding), 0) as binding_s,
        coalesce(sum(w_s) filter (where kv_bound), 0) as kv_bound_s,
        coalesce(sum(waiting * w_s), 0) as waiting_request_s,
        coalesce(sum(waiting * w_s) filter (where binding), 0) as binding_waiting_request_s,
        coalesce(sum(waiting * w_s) filter (where kv_bound), 0) as kv_bound_waiting_request_s,
        coalesce(sum(waiting * w_s) filter (where queued and not at_cap and not kv_bound), 0)
            as below_cap_waiting_request_s,
        median(kv_usage) filter (where at_cap) as kv_usage_median_at_cap,
        median(kv_usage) filter (where binding) as kv_usage_median_binding,
        avg(kv_usage) filter (where queued) as kv_usage_mean_queued,
        median(state_usage) filter (where at_cap) as state_usage_median_at_cap
    from lines
    group by start_id
),

by_episode as (
    select start_id, count(*) as episodes, max(duration_s) as longest_episode_s
    from episodes
    group by start_id
),

-- the times at least one engine of a start was in an episode: its episodes merged where they overlap (the
-- ranks' episodes may), so that an arrival is in an episode iff the latest span beginning before it still runs
spans as (
    select start_id, min(began) as began, max(ended) as ended
    from (
        select *, sum(opens::integer) over (partition by start_id order by began, ended
                                            rows between unbounded preceding and current row) as span
        from (
            select
                start_id, began, ended,
                coalesce(began > max(ended) over (partition by start_id order by began, ended
                                                  rows between unbounded preceding and 1 preceding), true) as opens
            from episodes
        )
    )
    group by start_id, span
),

in_period as (
    select st.start_id, r.arrival, r.queue_s
    from joined_requests as r
    join starts as st
        on r.deployment = st.deployment
       and r.arrival >= st.period_since
       and (st.period_until is null or r.arrival < st.period_until)
),

requests as (
-- @duckdb
    select p.start_id, p.arrival, p.queue_s, coalesce(p.arrival < sp.ended, false) as in_episode
    from in_period as p
    asof left join spans as sp on sp.start_id = p.start_id and p.arrival >= sp.began
-- @spark
    select p.start_id, p.arrival, p.queue_s, sp.start_id is not null as in_episode
    from in_period as p
    left join spans as sp on sp.start_id = p.start_id and p.arrival >= sp.began and p.arrival < sp.ended
-- @end
),

by_request as (
    select
        start_id,
        count(*) as requests,
        count(queue_s) as requests_with_queue,
        sum(queue_s) as queue_s_sum,
        quantile_cont(queue_s, 0.5) as queue_p50,
        quantile_cont(queue_s, 0.99) as queue_p99,
        count(*) filter (where in_episode) as episode_requests,
        sum(queue_s) filter (where in_episode) as episode_queue_s_sum,
        quantile_cont(queue_s, 0.5) filter (where in_episode) as episode_queue_p50,
        quantile_cont(queue_s, 0.99) filter (where in_episode) as episode_queue_p99
    from requests
    group by start_id
),

final as (
    select
        l.start_id,
        st.deployment,
        l.ranks,
        l.lines,
        l.span_s,
        l.observed_s,
        l.at_cap_lines,
        l.queued_lines,
        l.at_cap_queued_lines,
        l.binding_lines,
        l.kv_bound_lines,
        l.at_cap_s,
        l.queued_s,
        l.binding_s,
        l.kv_bound_s,
        l.binding_s / nullif(l.span_s * l.ranks, 0) as binding_share,
        coalesce(e.episodes, 0) as episodes,
        coalesce(e.longest_episode_s, 0.0) as longest_episode_s,
        l.waiting_request_s,
        l.binding_waiting_request_s,
        l.kv_bound_waiting_request_s,
        l.below_cap_waiting_request_s,
        l.kv_usage_median_at_cap,
        l.kv_usage_median_binding,
        l.kv_usage_mean_queued,
        l.state_usage_median_at_cap,
        coalesce(r.requests, 0) as requests,
        coalesce(r.requests_with_queue, 0) as requests_with_queue,
        r.queue_s_sum,
        r.queue_p50,
        r.queue_p99,
        coalesce(r.episode_requests, 0) as episode_requests,
        r.episode_queue_s_sum,
        r.episode_queue_p50,
        r.episode_queue_p99
    from by_line as l
    join starts as st on st.start_id = l.start_id
    left join by_episode as e on e.start_id = l.start_id
    left join by_request as r on r.start_id = l.start_id
)

select * from final
order by start_id
