-- Question: which requests crossed each request-scoped (or deployment-scoped) feature's threshold?
-- Grain: one row per (request, feature) where the feature is evaluated for the request's engine start.
-- Parameters: none (reads int_threshold_requests and thr_settings: effective settings rows with config_id, feature,
--   quantity, op, threshold, scope, evaluate, deployment_crossed, registered by the caller).
-- Columns: rid, feature, value (the request's quantity: prompt_tokens and kv_len_at_prefill = prompt tokens
--   (cached + new); uncached_prompt_tokens = prompt - cached; peak_kv_len = prompt + output; output_tokens;
--   cached_tokens), crossed (value op threshold; for deployment-scoped features every request of a
--   deployment whose configuration crossed), estimated (uncached tokens with cached tokens unknown: taken as
--   the whole prompt), unknown (the quantity is missing: not counted as crossed); and the request's workload,
--   day, prompt_tokens and prefill_tokens (from int_threshold_requests, for threshold_crossings.sql).
with

requests as (
    select * from int_threshold_requests
),

settings as (
    select * from thr_settings
    where evaluate and scope in ('request', 'deployment')
),

valued as (
    select
        r.rid,
        r.workload,
        r.day,
        r.prompt_tokens,
        r.prefill_tokens,
        s.feature,
        s.scope,
        s.op,
        s.threshold,
        s.deployment_crossed,
        case s.quantity
            when 'prompt_tokens' then r.prompt_tokens
            when 'kv_len_at_prefill' then r.prompt_tokens
            when 'uncached_prompt_tokens' then r.prompt_tokens - coalesce(r.cached_tokens, 0)
            when 'peak_kv_len' then r.prompt_tokens + r.output_tokens
            when 'output_tokens' then r.output_tokens
            when 'cached_tokens' then r.cached_tokens
        end::double as value,
        s.quantity = 'uncached_prompt_tokens' and r.cached_tokens is null and r.prompt_tokens is not null
            as estimated
    from requests as r
    join settings as s using (config_id)
),

final as (
    select
        rid,
        feature,
        value,
        case
            when scope = 'deployment' then coalesce(deployment_crossed, false)
            else coalesce(case op
                when '>' then value > threshold
                when '>=' then value >= threshold
                when '<' then value < threshold
                when '<=' then value <= threshold
            end, false)
        end as crossed,
        estimated,
        scope = 'request' and value is null as unknown,
        workload,
        day,
        prompt_tokens,
        prefill_tokens
    from valued
)

select * from final
