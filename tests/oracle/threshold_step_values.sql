-- Question: what value did each step-scoped feature's quantity have on every step or periodic row, and was
--   it over the threshold?
-- Grain: one row per (feature, engine_steps row carrying the feature's quantity) in the window.
-- Parameters: $since, $until (TIMESTAMPTZ, NULL = open). Reads engine_steps, thr_starts and thr_settings
--   (registered by the caller).
-- Columns: feature, file, line, part (hash of feature and file: a cheap window partition), deployment, ts,
--   kind, cuda_graph, op, threshold, estimated (decode batch size taken from the periodic line's running
--   count), value, crossed. Quantities: decode_batch_size = #running-req of decode lines, else running of
--   periodic lines (when the file has no decode lines); running_requests = running; prefill_batch_tokens =
--   new tokens of prefill lines; step_tokens = batch tokens, else new tokens (prefill) or running (decode);
--   state_usage, kv_usage, waiting_requests, preemptions (0 on a periodic line without `Preemptions:`, which
--   vLLM 0.15+ prints only when there were some).
-- Oracle: a test reference for attribution.thresholds.steps.step_rows and features (the product path), which
--   tests compare with it; the product never runs this file.
with

-- every column, an open end as infinity (the oracle is not tuned, nor written as the product: that reads only
-- the columns it needs and assigns starts by a range join, not this ASOF join)
steps as (
    select * from engine_steps
    where ts >= coalesce($since::timestamptz, '-infinity'::timestamptz)
      and ts < coalesce($until::timestamptz, 'infinity'::timestamptz)
),

files as (
    select file, bool_or(kind = 'decode') as has_decode from steps group by file
),

starts as (
    select config_id, deployment, engine, ts from thr_starts
),

with_engine as (
    select s.*, st.config_id
    from (select * from steps where engine is not null) as s
    asof left join starts as st on s.deployment = st.deployment and s.engine = st.engine and s.ts >= st.ts
),

without_engine as (
    select s.*, st.config_id
    from (select * from steps where engine is null) as s
    asof left join starts as st on s.deployment = st.deployment and s.ts >= st.ts
),

assigned as (
    select * replace (coalesce(config_id, 'default:' || coalesce(engine, 'unknown')) as config_id)
    from (select * from with_engine union all by name select * from without_engine)
),

valued as (
    select
        f.feature,
        a.file,
        a.line,
        a.deployment,
        a.ts,
        a.kind,
        a.cuda_graph,
        f.op,
        f.threshold,
        a.kind = 'stats' and f.quantity = 'decode_batch_size' as estimated,
        case f.quantity
            when 'decode_batch_size' then case
                when a.kind = 'decode' then a.running
                when a.kind = 'stats' and not fl.has_decode then a.running end
            when 'running_requests' then a.running
            when 'prefill_batch_tokens' then case when a.kind = 'prefill' then a.new_tokens end
            when 'step_tokens' then coalesce(a.batch_tokens, case a.kind when 'prefill' then a.new_tokens
                                                                       when 'decode' then a.running end)
            when 'state_usage' then a.state_usage
            when 'kv_usage' then a.kv_usage
            when 'waiting_requests' then a.waiting
            when 'preemptions' then coalesce(a.preemptions, case when a.kind = 'stats' then 0 end)
        end::double as value
    from assigned as a
    join files as fl using (file)
    join (select * from thr_settings where evaluate and scope = 'step') as f using (config_id)
),

final as (
    select
        *,
        hash(feature, file) as part,
        coalesce(case op
            when '>' then value > threshold
            when '>=' then value >= threshold
            when '<' then value < threshold
            when '<=' then value <= threshold
        end, false) as crossed
    from valued
    where value is not null
)

select * from final
