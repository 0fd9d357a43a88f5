-- Question: how much did each deployment serve, at its busiest and on average, and for how long did a request
--   occupy it?
-- Grain: one row per (deployment, grp), or per deployment, with requests arriving in the window.
-- Parameters: $per_group (BOOLEAN: one row per (deployment, grp); false: one per deployment, grp NULL).
-- Columns: deployment, grp, requests, completed (not failed, end time known), span_s (first arrival to last
--   end of these requests), completed_per_day (completed / span_s * 86400), busiest_hour (UTC clock hour with
--   the most completions), busiest_hour_completed, input_tokens, output_tokens (sums over completed requests),
--   input_tps, output_tps (tokens / span_s), mean_e2e_s, mean_service_s (admission to end: the time a request
--   holds a running slot; arrival to end where queue_s is unknown), busy_service_s (the same over the
--   requests completing in the busiest hour: the service time under the heaviest observed load),
--   split_known_share (completed requests with queue_s known).
with

requests as (
    select * from int_analysis_requests where in_window
),

completed as (
    select
        * replace (case when $per_group then grp end as grp),
        ok and t_end is not null as done,
        (t_end - coalesce(t_admit, t_arrival)) / 1e6 as service_s,
        time_bucket(interval 1 hour, to_timestamp(t_end / 1e6)) as end_hour
    from requests
),

hours as (
    select deployment, grp, end_hour, count(*) as n, avg(service_s) as service_s
    from completed
    where done
    group by all
),

busiest as (
    -- the struct orders by completions, then by the earlier hour
    select
        deployment,
        grp,
        arg_max(end_hour, {n: n, neg_hour: -epoch(end_hour)}) as busiest_hour,
        max(n) as busiest_hour_completed,
        arg_max(service_s, {n: n, neg_hour: -epoch(end_hour)}) as busy_service_s
    from hours
    group by all
),

sums as (
    select
        deployment,
        grp,
        count(*) as requests,
        count(*) filter (where done) as completed,
        (max(coalesce(t_end, t_arrival)) - min(t_arrival)) / 1e6 as span_s,
        coalesce(sum(prompt_tokens) filter (where done), 0)::bigint as input_tokens,
        coalesce(sum(output_tokens) filter (where done), 0)::bigint as output_tokens,
        avg(e2e_s) filter (where done) as mean_e2e_s,
        avg(service_s) filter (where done) as mean_service_s,
        avg((t_admit is not null)::integer) filter (where done) as split_known_share
    from completed
    group by deployment, grp
),

final as (
    select
        s.deployment, s.grp, s.requests, s.completed, s.span_s,
        s.completed * 86400 / nullif(s.span_s, 0) as completed_per_day,
        b.busiest_hour, b.busiest_hour_completed,
        s.input_tokens, s.output_tokens,
        s.input_tokens / nullif(s.span_s, 0) as input_tps,
        s.output_tokens / nullif(s.span_s, 0) as output_tps,
        s.mean_e2e_s, s.mean_service_s, b.busy_service_s, s.split_known_share
    from sums as s
    left join busiest as b on b.deployment = s.deployment and b.grp is not distinct from s.grp
)

select * from final
order by deployment, grp = '(none)', grp
