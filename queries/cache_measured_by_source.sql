-- Question: how much of the prompt did the prefix cache serve, as each source that reports it measured it?
-- Grain: one row per source measure, workload, deployment and UTC day with any queried tokens in [$since, $until).
-- Parameters: $since, $until (TIMESTAMPTZ; NULL leaves that end open); $workload, $deployment (VARCHAR;
--   NULL: all).
-- Columns: measure (requests.cached_tokens: per-request cached/prompt tokens (SGLang meta_info, gateway
--   prompt_tokens_details.cached_tokens; the engine's value first, the gateway's where the engine has none);
--   engine_steps.cached_tokens: SGLang prefill lines #cached-token / (#new-token + #cached-token);
--   engine_steps.prefix_hit_rate: vLLM stats lines' sliding-window hit rate weighted by the line's prompt
--   throughput (an approximation: the rate covers the last 1,000 requests, not the interval);
--   metric_counters: increase of vllm:prefix_cache_hits_total over vllm:prefix_cache_queries_total, or
--   sglang:cached_tokens_total over sglang:prompt_tokens_total, counter resets handled),
--   source (the format the rows came from), workload ('(all)' where the measure has no workload),
--   deployment ('(none)' where unknown), day (UTC date), queried_tokens, cached_tokens (tokens, or token-weights
--   for the vLLM stats measure), samples (requests, log lines or counter samples).
with

engine_cached as (
    -- which engine rows reported cached tokens themselves (the joined row's value is the engine's then)
    select request_key, bool_or(cached_tokens is not null) as has
    from requests
    where source_kind = 'engine' and request_key is not null
    group by all
),

req as (
    select
        'requests.cached_tokens' as measure,
        case when coalesce(c.has, false) or j.gateway_source is null then j.source
            else j.gateway_source end as source,
        coalesce(j.workload, '(none)') as workload,
        coalesce(j.deployment, '(none)') as deployment,
        j.arrival as ts,
        j.prompt_tokens::double as queried,
        j.cached_tokens::double as cached
    from joined_requests as j
    left join engine_cached as c on j.matched = 'both' and c.request_key = j.request_key
    where j.cached_tokens is not null and j.prompt_tokens > 0 and j.cached_tokens <= j.prompt_tokens
),

sglang_steps as (
    select
        'engine_steps.cached_tokens' as measure, source, '(all)' as workload,
        coalesce(deployment, '(none)') as deployment, ts,
        (coalesce(new_tokens, 0) + cached_tokens)::double as queried, cached_tokens::double as cached
    from engine_steps
    where kind = 'prefill' and cached_tokens is not null
),

vllm_stats as (
    select
        'engine_steps.prefix_hit_rate' as measure, source, '(all)' as workload,
        coalesce(deployment, '(none)') as deployment, ts,
        prompt_tput as queried, prompt_tput * prefix_hit_rate as cached
    from engine_steps
    where kind = 'stats' and prefix_hit_rate is not null and prompt_tput > 0
),

counters as (
    select
        *,
        case when metric in ('vllm:prefix_cache_hits_total', 'sglang:cached_tokens_total') then 'hit'
            else 'query' end as role,
        value - lag(value) over (
            partition by source, file, deployment, engine, model, metric, series order by ts
        ) as delta
    from metric_counters
    where metric in ('vllm:prefix_cache_hits_total', 'vllm:prefix_cache_queries_total',
                     'sglang:cached_tokens_total', 'sglang:prompt_tokens_total')
),

counter_rows as (
    select
        'metric_counters' as measure, source, '(all)' as workload,
        coalesce(deployment, '(none)') as deployment, ts,
        -- a counter that went down was reset: its new value is the increase since the reset
        sum(case when role = 'query' then greatest(coalesce(delta, 0), 0)
                 + case when delta < 0 then value else 0 end else 0 end) as queried,
        sum(case when role = 'hit' then greatest(coalesce(delta, 0), 0)
                 + case when delta < 0 then value else 0 end else 0 end) as cached
    from counters
    group by all
),

rows as (
    select * from req
    union all select * from sglang_steps
    union all select * from vllm_stats
    union all select * from counter_rows
),

windowed as (
    select *, strftime(timezone('UTC', ts), '%Y-%m-%d') as day
    from rows
    where ts is not null
      and ($since::timestamptz is null or ts >= $since::timestamptz)
      and ($until::timestamptz is null or ts < $until::timestamptz)
      and ($workload::varchar is null or workload = $workload::varchar)
      and ($deployment::varchar is null or deployment = $deployment::varchar)
),

final as (
    select
        measure, source, workload, deployment, day,
        sum(queried) as queried_tokens,
        sum(cached) as cached_tokens,
        count(*) as samples
    from windowed
    group by all
    having sum(queried) > 0
    order by measure, source, workload, deployment, day
)

select * from final
