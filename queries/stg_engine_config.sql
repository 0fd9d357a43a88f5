-- Question: what each engine start looked like: version, model, flags and the memory facts it printed.
-- Grain: one row per engine start (file, start_line).
-- Parameters: none.
-- Columns: ts (first line of the start), the engine_config columns of DESIGN.md; flags as MAP(VARCHAR, VARCHAR)
--   from the last flags line of the start; each fact from the last line of the start that printed it (a row with
--   no line number before the numbered ones).
-- Not transpiled: `list_filter` with an index lambda `lambda e, i` over the slice `flags[i + 1:]` (Spark's
--   filter lambdas take (x, i) but sqlglot does not carry the slice or the index over): on Spark a flag named
--   twice keeps its last value through the map key dedup policy LAST_WIN; tests/test_spark.py checks the two.
with

raw as (
    -- a flag named twice in one line keeps its last value (a MAP's keys are unique; the ingest dedups too,
    -- but the store admits any list)
    -- a row whose line is unknown (admitted) counts as before the start's numbered lines: each fact is taken
    -- by the line, and arg_max passes over a NULL one
-- @duckdb
    select * replace (list_filter(flags, lambda e, i: not list_contains(
        list_transform(flags[i + 1:], lambda x: x.key), e.key)) as flags, coalesce(line, -1) as line)
    from raw_engine_config
-- @spark
    -- map_from_entries under Spark's spark.sql.mapKeyDedupPolicy=LAST_WIN (attribution.spark.connection sets it)
    select * replace (coalesce(line, -1) as line) from raw_engine_config
-- @end
),

final as (
    select
        file,
        start_line,
        min(ts) as ts,
        any_value(source) as source,
        any_value(source_kind) as source_kind,
        min(start_line) as line,
        arg_max(deployment, line) as deployment,
        any_value(label) as label,
        arg_max(engine, line) filter (where engine is not null) as engine,
        arg_max(version, line) filter (where version is not null) as version,
        arg_max(model, line) filter (where model is not null) as model,
        arg_max(served_model, line) filter (where served_model is not null) as served_model,
        map_from_entries(arg_max(flags, line) filter (where flags is not null)) as flags,
        arg_max(kv_pool_tokens, line) filter (where kv_pool_tokens is not null) as kv_pool_tokens,
        arg_max(kv_pool_bytes, line) filter (where kv_pool_bytes is not null) as kv_pool_bytes,
        arg_max(state_pool_slots, line) filter (where state_pool_slots is not null) as state_pool_slots,
        arg_max(state_pool_bytes, line) filter (where state_pool_bytes is not null) as state_pool_bytes,
        arg_max(available_kv_bytes, line) filter (where available_kv_bytes is not null) as available_kv_bytes,
        arg_max(max_concurrency, line) filter (where max_concurrency is not null) as max_concurrency,
        arg_max(max_running_requests, line) filter (where max_running_requests is not null) as max_running_requests,
        arg_max(max_model_len, line) filter (where max_model_len is not null) as max_model_len,
        arg_max(block_size, line) filter (where block_size is not null) as block_size,
        arg_max(mamba_page_padding, line) filter (where mamba_page_padding is not null) as mamba_page_padding,
        arg_max(chunked_prefill_size, line) filter (where chunked_prefill_size is not null) as chunked_prefill_size,
        arg_max(max_prefill_tokens, line) filter (where max_prefill_tokens is not null) as max_prefill_tokens,
        arg_max(available_gpu_mem_bytes, line) filter (where available_gpu_mem_bytes is not null)
            as available_gpu_mem_bytes,
        arg_max(weights_bytes, line) filter (where weights_bytes is not null) as weights_bytes,
        arg_max(tp_size, line) filter (where tp_size is not null) as tp_size
    from raw
    group by file, start_line
)

select * from final
