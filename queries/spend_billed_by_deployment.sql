-- Question: what did the gateway bill, per pod (and group), for the requests arriving in the window?
-- Grain: one row per (deployment, grp), or per deployment, with requests arriving in the window.
-- Parameters: $per_group (BOOLEAN: one row per (deployment, grp); false: one per deployment, grp NULL).
-- Columns: deployment, grp, requests, gateway_requests (logged by a gateway), billed_requests (with a cost,
--   0 included), zero_cost_requests (cost exactly 0), unpriced_requests (logged by a gateway, no cost: no
--   price for the model, or no cost in the log), billed_usd (sum of cost; NULL where nothing had a cost),
--   billed_input_tokens, billed_output_tokens (tokens of the requests with a cost), usd_per_m_input,
--   usd_per_m_output (billed_usd / those tokens * 1e6, the whole amount charged to each token kind as the
--   GPU cost per million is), cost_sources (the gateway formats whose costs were summed, comma-separated),
--   billing ('billed', 'partly priced': some gateway requests had no cost, '0 billed': every cost was 0,
--   'no price': no gateway request had a cost, 'no gateway': none was logged by a gateway).
with

requests as (
    select * from int_analysis_requests where in_window
),

sums as (
    select
        deployment,
        case when $per_group then grp end as grp,
        count(*) as requests,
        count(gateway_source) as gateway_requests,
        count(cost) as billed_requests,
        count(*) filter (where cost = 0) as zero_cost_requests,
        count(*) filter (where gateway_source is not null and cost is null) as unpriced_requests,
        sum(cost) as billed_usd,
        coalesce(sum(prompt_tokens) filter (where cost is not null), 0)::bigint as billed_input_tokens,
        coalesce(sum(output_tokens) filter (where cost is not null), 0)::bigint as billed_output_tokens,
        string_agg(distinct gateway_source, ',' order by gateway_source) filter (where cost is not null)
            as cost_sources
    from requests
    group by all
),

final as (
    select
        deployment, grp, requests, gateway_requests, billed_requests, zero_cost_requests, unpriced_requests,
        billed_usd, billed_input_tokens, billed_output_tokens,
        billed_usd / nullif(billed_input_tokens, 0) * 1e6 as usd_per_m_input,
        billed_usd / nullif(billed_output_tokens, 0) * 1e6 as usd_per_m_output,
        cost_sources,
        case
            when gateway_requests = 0 then 'no gateway'
            when billed_requests = 0 then 'no price'
            when billed_usd = 0 then '0 billed'
            when unpriced_requests > 0 then 'partly priced'
            else 'billed'
        end as billing
    from sums
)

select * from final
order by deployment, grp = '(none)', grp
