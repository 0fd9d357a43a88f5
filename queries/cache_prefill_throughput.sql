-- Question: how fast does each deployment prefill, as its engine logs measured it?
-- Grain: one row per deployment with engine lines reporting prompt throughput in [$since, $until).
-- Parameters: $since, $until (TIMESTAMPTZ; NULL leaves that end open).
-- Columns: deployment ('(none)' where unknown), prefill_tokens_per_s (the 90th percentile of the lines'
--   prompt throughput while prefilling: vLLM stats lines average over their 10 s interval, idle time
--   included, so a high percentile is closer to what a busy engine sustains), lines.
with

busy as (
    select coalesce(deployment, '(none)') as deployment, prompt_tput
    from engine_steps
    where prompt_tput > 0 and kind in ('stats', 'prefill')
      and ($since::timestamptz is null or ts >= $since::timestamptz)
      and ($until::timestamptz is null or ts < $until::timestamptz)
),

final as (
    select deployment, quantile_cont(prompt_tput, 0.9) as prefill_tokens_per_s, count(*) as lines
    from busy
    group by all
    order by deployment
)

select * from final
