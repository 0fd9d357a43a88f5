-- Question: which engine starts does the store know, and what did each print about itself?
-- Grain: one row per engine start (file, start_line) with a timestamp and a deployment.
-- Parameters: none.
-- Columns: config_id (file:start_line), deployment, engine, version, model (the model path or repo id, else
--   the served name), ts (the start), next_ts (the next start of the same deployment and engine; NULL for
--   the last), flags (MAP(VARCHAR, VARCHAR) of the arguments the engine printed), and the facts it printed:
--   max_model_len, max_running_requests, chunked_prefill_size, max_prefill_tokens, block_size,
--   kv_pool_tokens, state_pool_slots, mamba_page_padding, tp_size, available_gpu_mem_bytes, weights_bytes.
with

starts as (
    select * from engine_config
    where ts is not null and deployment is not null
),

final as (
    select
        file || ':' || start_line as config_id,
        deployment,
        engine,
        version,
        coalesce(model, served_model) as model,
        ts,
        lead(ts) over (partition by deployment, engine order by ts, file, start_line) as next_ts,
        flags,
        max_model_len,
        max_running_requests,
        chunked_prefill_size,
        max_prefill_tokens,
        block_size,
        kv_pool_tokens,
        state_pool_slots,
        mamba_page_padding,
        tp_size,
        available_gpu_mem_bytes,
        weights_bytes
    from starts
)

select * from final
order by deployment, ts
