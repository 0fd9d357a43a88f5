-- Question: per engine start, how many requests wanted to run at once and how many KV tokens did they hold:
--   the peak and a high percentile over time, from the engine's own step lines?
-- Grain: one row per start of the temporary table int_memsplit_starts; reads int_memsplit_lines and joined_requests.
-- Parameters: $q (DOUBLE in (0, 1]: the percentile, e.g. 0.99).
-- Columns: start_id, deployment, running_peak, running_q, demand_peak, demand_q (running + waiting),
--   live_tokens_peak, live_tokens_q, demand_tokens_peak, demand_tokens_q (int_memsplit_lines definitions);
--   `_q` = the smallest value v such that lines with values <= v cover at least $q of the weighted time (each
--   line weighted by w_s; unweighted when no line has a weight); mean_running (time average),
--   mean_live_tokens (live KV tokens per running request: sum of live_tokens x w_s / sum of running x w_s),
--   requests (arriving in the period), longest_request (max prompt + output tokens of those requests),
--   longest_prompt, prefix_hit_rate_mean (plain mean of the lines' prefix cache hit rates; NULL if none).
with

starts as (
    select * from int_memsplit_starts
),

lines as (
    select * from int_memsplit_lines
),

-- the weighted time and the lines at each distinct value of each metric: ordering those is far cheaper than
-- ordering lines (NULL values count nowhere)
by_value as (
    select start_id, 'running' as metric, running::double as value, sum(w_s) as w, count(*) as n
    from lines where running is not null group by start_id, running
    union all
    select start_id, 'demand', demand::double, sum(w_s), count(*)
    from lines where demand is not null group by start_id, demand
    union all
    select start_id, 'live_tokens', live_tokens, sum(w_s), count(*)
    from lines where live_tokens is not null group by start_id, live_tokens
    union all
    select start_id, 'demand_tokens', demand_tokens, sum(w_s), count(*)
    from lines where demand_tokens is not null group by start_id, demand_tokens
),

cumulative as (
    select
        *,
        -- lines with values <= this one (all of its peers): their weight and their share of the lines
        sum(w) over (partition by start_id, metric order by value) as cum,
        sum(w) over (partition by start_id, metric) as total,
        sum(n) over (partition by start_id, metric order by value) / sum(n) over (partition by start_id, metric)
            as rank_share
    from by_value
),

quantiles as (
    select
        start_id,
        metric,
        max(value) as peak,
        min(value) filter (where case when total > 0 then cum >= $q * total else rank_share >= $q end) as q
    from cumulative
    group by start_id, metric
),

pivoted as (
    select
        start_id,
        max(peak) filter (where metric = 'running') as running_peak,
        max(q) filter (where metric = 'running') as running_q,
        max(peak) filter (where metric = 'demand') as demand_peak,
        max(q) filter (where metric = 'demand') as demand_q,
        max(peak) filter (where metric = 'live_tokens') as live_tokens_peak,
        max(q) filter (where metric = 'live_tokens') as live_tokens_q,
        max(peak) filter (where metric = 'demand_tokens') as demand_tokens_peak,
        max(q) filter (where metric = 'demand_tokens') as demand_tokens_q
    from quantiles
    group by start_id
),

means as (
    select
        start_id,
        coalesce(sum(running * w_s) / nullif(sum(w_s), 0), avg(running)) as mean_running,
        coalesce(
            sum(live_tokens * w_s) / nullif(sum(running * w_s), 0),
            sum(live_tokens) / nullif(sum(running), 0)
        ) as mean_live_tokens,
        avg(prefix_hit_rate) as prefix_hit_rate_mean
    from lines
    group by start_id
),

requests as (
    select
        st.start_id,
        count(*) as requests,
        max(coalesce(r.prompt_tokens, 0) + coalesce(r.output_tokens, 0)) as longest_request,
        max(r.prompt_tokens) as longest_prompt
    from joined_requests as r
    join starts as st
        on r.deployment = st.deployment
       and r.arrival >= st.period_since
       and (st.period_until is null or r.arrival < st.period_until)
    group by st.start_id
),

final as (
    select
        st.start_id,
        st.deployment,
        p.running_peak,
        p.running_q,
        p.demand_peak,
        p.demand_q,
        p.live_tokens_peak,
        p.live_tokens_q,
        p.demand_tokens_peak,
        p.demand_tokens_q,
        m.mean_running,
        m.mean_live_tokens,
        m.prefix_hit_rate_mean,
        coalesce(r.requests, 0) as requests,
        r.longest_request,
        r.longest_prompt
    from starts as st
    left join pivoted as p on p.start_id = st.start_id
    left join means as m on m.start_id = st.start_id
    left join requests as r on r.start_id = st.start_id
)

select * from final
order by start_id
