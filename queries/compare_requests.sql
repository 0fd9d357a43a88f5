-- Question: which completed requests form each cohort of a before/after comparison, and in which stratum is each?
-- Grain: one row per completed request (status not error / failed / aborted) of int_threshold_requests in either cohort.
-- Parameters: $cohort_by ('label', 'version' or 'window'); $before, $after (a label, or an engine version
--   written as `0.20.0` or `vllm 0.20.0`); $before_since, $before_until, $after_since, $after_until
--   (TIMESTAMPTZ arrival windows [since, until) for 'window'; NULL otherwise); $edges (BIGINT[] prompt-length
--   bucket edges, ascending). A request in both windows belongs to before.
-- Columns: rid, cohort ('before' / 'after'), workload, bucket (the number of edges <= prompt_tokens: 0 is
--   below the first edge; NULL when the prompt length is unknown), config_id, deployment, engine,
--   engine_version, arrival, prompt_tokens, queue_s, ttft_s, tpot_s, e2e_s.
with

requests as (
    select * from int_threshold_requests where ok
),

tagged as (
    select
        *,
        case $cohort_by
            when 'label' then case when label = $before then 'before' when label = $after then 'after' end
            when 'version' then case
                when engine_version = $before or version_label(engine, engine_version) = $before then 'before'
                when engine_version = $after or version_label(engine, engine_version) = $after then 'after' end
            when 'window' then case
                when arrival >= $before_since::timestamptz and arrival < $before_until::timestamptz then 'before'
                when arrival >= $after_since::timestamptz and arrival < $after_until::timestamptz then 'after' end
        end as cohort
    from requests
),

final as (
    select
        rid,
        cohort,
        workload,
        case when prompt_tokens is not null
            then len(list_filter($edges::bigint[], lambda e: e <= prompt_tokens)) end as bucket,
        config_id,
        deployment,
        engine,
        engine_version,
        arrival,
        prompt_tokens,
        queue_s,
        ttft_s,
        tpot_s,
        e2e_s
    from tagged
    where cohort is not null
)

select * from final
-- in rid order: the re-weighted percentiles interpolate between requests, and requests of different strata
-- with equal values must meet them in the same order every time
order by rid
