-- Question: which requests of arrival-only deployments (public traces) need a service model to be placed in time?
-- Grain: one row per request of $deployments that arrived in the window, completed (not failed) and has no end
--   time, ordered by deployment and arrival.
-- Parameters: $deployments (VARCHAR[]).
-- Columns: deployment, workload, model, label, engine, engine_version, source_kind, arrival, prompt_tokens,
--   output_tokens, cached_tokens.
with

requests as (
    select * from int_analysis_requests
),

final as (
    select
        deployment, workload, model, label, engine, engine_version, source_kind, arrival,
        prompt_tokens, output_tokens, cached_tokens
    from requests
    where in_window and ok and t_arrival is not null and t_end is null and prompt_tokens is not null
      and list_contains($deployments::varchar[], deployment)
)

select * from final
order by deployment, arrival
