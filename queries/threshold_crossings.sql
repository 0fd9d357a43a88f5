-- Question: how many requests crossed each feature's threshold, and how much of the prefill work do they carry?
-- Grain: one row per (feature, level, grp): level 'all' (grp 'all'), 'workload' (grp = workload) or 'day'
--   (grp = UTC date of arrival).
-- Parameters: none (reads int_threshold_request_flags and int_threshold_requests).
-- Columns: feature, level, grp, requests (evaluated for the feature: served by a start where it is on or
--   possibly on), crossed, share_of_engine_requests (crossed / requests), all_requests (every request of
--   the group in the window), share_of_all_requests (crossed / all_requests),
--   prefill_token_share_of_all_requests (uncached prompt tokens of the crossing requests / those of all
--   requests of the group), prompt_token_share_of_all_requests (the same for prompt tokens), crossed_estimated (crossings whose quantity was estimated), unknown (requests whose quantity
--   is missing), min_crossing, max_value (the smallest crossing value, the largest value seen).
with

requests as (
    select rid, workload, day, prompt_tokens, prefill_tokens from int_threshold_requests
),

flags as (
    select * from int_threshold_request_flags
),

totals as (
    select
        case when grouping(workload) = 0 then 'workload' when grouping(day) = 0 then 'day' else 'all' end as level,
        case when grouping(workload) = 0 then workload when grouping(day) = 0 then coalesce(day, '(none)')
             else 'all' end as grp,
        count(*) as all_requests,
        sum(prompt_tokens) as prompt_tokens,
        sum(prefill_tokens) as prefill_tokens
    from requests
    group by grouping sets ((), (workload), (day))
),

-- per feature, workload and day first (a few hundred rows), then the grouping sets over those: one pass over
-- the flags, which carry the request's workload, day and token counts
fine as (
    select
        feature,
        workload,
        day,
        count(*) as requests,
        count(*) filter (where crossed) as crossed,
        count(*) filter (where crossed and estimated) as crossed_estimated,
        count(*) filter (where unknown) as unknown,
        sum(prompt_tokens) filter (where crossed) as crossed_prompt_tokens,
        sum(prefill_tokens) filter (where crossed) as crossed_prefill_tokens,
        min(value) filter (where crossed) as min_crossing,
        max(value) as max_value
    from flags
    group by feature, workload, day
),

crossings as (
    select
        feature,
        case when grouping(workload) = 0 then 'workload' when grouping(day) = 0 then 'day' else 'all' end
            as level,
        case when grouping(workload) = 0 then workload when grouping(day) = 0 then coalesce(day, '(none)')
             else 'all' end as grp,
        sum(requests)::bigint as requests,
        sum(crossed)::bigint as crossed,
        sum(crossed_estimated)::bigint as crossed_estimated,
        sum(unknown)::bigint as unknown,
        coalesce(sum(crossed_prompt_tokens), 0) as crossed_prompt_tokens,
        coalesce(sum(crossed_prefill_tokens), 0) as crossed_prefill_tokens,
        min(min_crossing) as min_crossing,
        max(max_value) as max_value
    from fine
    group by grouping sets ((feature), (feature, workload), (feature, day))
),

final as (
    select
        c.feature,
        c.level,
        c.grp,
        c.requests,
        c.crossed,
        c.crossed / nullif(c.requests, 0) as share_of_engine_requests,
        t.all_requests,
        c.crossed / nullif(t.all_requests, 0) as share_of_all_requests,
        c.crossed_prefill_tokens / nullif(t.prefill_tokens, 0) as prefill_token_share_of_all_requests,
        c.crossed_prompt_tokens / nullif(t.prompt_tokens, 0) as prompt_token_share_of_all_requests,
        c.crossed_estimated,
        c.unknown,
        c.min_crossing,
        c.max_value
    from crossings as c
    join totals as t using (level, grp)
)

select * from final
order by feature, list_position(['all', 'workload', 'day'], level), grp
