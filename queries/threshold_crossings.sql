-- Question: how many requests crossed each feature's threshold, and how much of the prefill work do they carry?
-- Grain: one row per (feature, level, grp): level 'all' (grp 'all'), 'workload' (grp = workload) or 'day'
--   (grp = UTC date of arrival).
-- Parameters: none (reads thr_request_flags and thr_requests).
-- Columns: feature, level, grp, requests (evaluated for the feature: served by a start where it is on or
--   possibly on), crossed, share (crossed / requests), all_requests (every request of the group in the
--   window), share_of_all (crossed / all_requests), prefill_token_share (uncached prompt tokens of the
--   crossing requests / those of all requests of the group), prompt_token_share (the same for prompt
--   tokens), crossed_estimated (crossings whose quantity was estimated), unknown (requests whose quantity
--   is missing), min_crossing, max_value (the smallest crossing value, the largest value seen).
with

requests as (
    select rid, workload, day, prompt_tokens, prefill_tokens from thr_requests
),

flags as (
    select * from thr_request_flags
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

crossings as (
    select
        f.feature,
        case when grouping(r.workload) = 0 then 'workload' when grouping(r.day) = 0 then 'day' else 'all' end
            as level,
        case when grouping(r.workload) = 0 then r.workload when grouping(r.day) = 0 then coalesce(r.day, '(none)')
             else 'all' end as grp,
        count(*) as requests,
        count(*) filter (where f.crossed) as crossed,
        count(*) filter (where f.crossed and f.estimated) as crossed_estimated,
        count(*) filter (where f.unknown) as unknown,
        coalesce(sum(r.prompt_tokens) filter (where f.crossed), 0) as crossed_prompt_tokens,
        coalesce(sum(r.prefill_tokens) filter (where f.crossed), 0) as crossed_prefill_tokens,
        min(f.value) filter (where f.crossed) as min_crossing,
        max(f.value) as max_value
    from flags as f
    join requests as r using (rid)
    group by grouping sets ((f.feature), (f.feature, r.workload), (f.feature, r.day))
),

final as (
    select
        c.feature,
        c.level,
        c.grp,
        c.requests,
        c.crossed,
        c.crossed / nullif(c.requests, 0) as share,
        t.all_requests,
        c.crossed / nullif(t.all_requests, 0) as share_of_all,
        c.crossed_prefill_tokens / nullif(t.prefill_tokens, 0) as prefill_token_share,
        c.crossed_prompt_tokens / nullif(t.prompt_tokens, 0) as prompt_token_share,
        c.crossed_estimated,
        c.unknown,
        c.min_crossing,
        c.max_value
    from crossings as c
    join totals as t using (level, grp)
)

select * from final
order by feature, list_position(['all', 'workload', 'day'], level), grp
