-- Question: what is every step-scoped quantity on each engine step or periodic row, and which engine start logged the row?
-- Grain: one row per engine_steps row with a timestamp in the window [$since, $until).
-- Parameters: $since, $until (TIMESTAMPTZ, NULL = open). Reads engine_steps and thr_starts (registered by the
--   caller: config_id, deployment, engine, ts).
-- Columns: file_id (1, 2, ... by file name: the rows of one log file share it), line, deployment, t (microseconds
--   since the epoch), kind, cuda_graph, config_hash (hash() of the config_id: the latest start of the row's
--   deployment and engine at or before it, else of its deployment, else 'default:<engine>' or
--   'default:unknown'), and one column per step quantity (DOUBLE; NULL where the row does not carry it):
--   running_requests, prefill_batch_tokens (new tokens of prefill lines), step_tokens (batch
--   tokens, else new tokens (prefill) or running (decode)), state_usage, kv_usage, waiting_requests,
--   preemptions (0 on a periodic line without `Preemptions:`, which vLLM 0.15+ prints only when there were
--   some). The same values as the test oracle tests/oracle/threshold_step_values.sql, one row per line
--   instead of one per line and feature: attribution.thresholds.steps compares them with each start's
--   thresholds. decode_batch_size is not a column: steps.decode_batch_sizes derives it from running_requests
--   and kind (the one statement of its rule, which a window cut from every line's rows applies too).
with

-- read where used (a column scan with the filters pushed down), not held: it has ten million rows a week
steps as not materialized (
    select file, line, deployment, engine, ts, kind, running, waiting, preemptions, kv_usage, state_usage,
           new_tokens, batch_tokens, cuda_graph
    from engine_steps
    where ts is not null
      and ($since::timestamptz is null or ts >= $since::timestamptz)
      and ($until::timestamptz is null or ts < $until::timestamptz)
),

files as (
    select file, row_number() over (order by file) as file_id
    from (select distinct file from steps)
),

-- each start holds from its first line to the next start of its deployment (and engine): a range join on
-- these few rows is far cheaper than an ASOF join that orders every step line
starts as (
    select
        config_id, hash(config_id) as config_hash, deployment, engine, ts,
        lead(ts) over (partition by deployment, engine order by ts, config_id) as next_ts,
        lead(ts) over (partition by deployment order by ts, config_id) as next_ts_any_engine
    from thr_starts
),

with_engine as (
    select s.*, st.config_hash
    from (select * from steps where engine is not null) as s
    left join starts as st
        on s.deployment = st.deployment and s.engine = st.engine
       and s.ts >= st.ts and (st.next_ts is null or s.ts < st.next_ts)
),

without_engine as (
    select s.*, st.config_hash
    from (select * from steps where engine is null) as s
    left join starts as st
        on s.deployment = st.deployment
       and s.ts >= st.ts and (st.next_ts_any_engine is null or s.ts < st.next_ts_any_engine)
),

assigned as (
    select * replace (coalesce(config_hash, hash('default:' || coalesce(engine, 'unknown'))) as config_hash)
    from (select * from with_engine union all by name select * from without_engine)
),

final as (
    select
        fl.file_id,
        a.line,
        a.deployment,
        epoch_us(a.ts) as t,
        a.kind,
        a.cuda_graph,
        a.config_hash,
        a.running::double as running_requests,
        case when a.kind = 'prefill' then a.new_tokens end::double as prefill_batch_tokens,
        coalesce(a.batch_tokens, case a.kind when 'prefill' then a.new_tokens
                                              when 'decode' then a.running end)::double as step_tokens,
        a.state_usage::double as state_usage,
        a.kv_usage::double as kv_usage,
        a.waiting::double as waiting_requests,
        coalesce(a.preemptions, case when a.kind = 'stats' then 0 end)::double as preemptions
    from assigned as a
    join files as fl using (file)
)

select * from final
