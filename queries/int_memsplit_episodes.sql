-- Question: when did the running cap bind with requests waiting and KV to spare, and for how long each time?
-- Grain: one row per episode of one engine (start_id, rank): runs of consecutive binding step lines (a run
--   ends at a non-binding line or at a silence longer than $max_gap_s), merged when less than $merge_s passes
--   between the end of one run and the start of the next; reads the temporary table int_memsplit_lines
--   (queries/int_memsplit_lines.sql).
-- Parameters: $max_gap_s (DOUBLE: the longest silence inside a run), $merge_s (DOUBLE: shorter breaks between
--   runs do not end an episode).
-- Columns: start_id, deployment, rank, episode (1, 2, ... per start and rank), began (first binding line),
--   ended (last binding line plus its weight), duration_s (sum of the binding lines' weights), lines (binding
--   lines), peak_waiting, waiting_request_s (sum of waiting x weight over the binding lines: request-seconds
--   queued while the cap bound), kv_usage_mean (weighted by the lines' weights; plain mean if they weigh
--   nothing), peak_running.
with

-- only binding lines make episodes; whether the engine's previous line was binding is in int_memsplit_lines
lines as (
    select * from int_memsplit_lines where binding
),

marked as (
    select
        *,
        not coalesce(prev_binding and gap_s <= $max_gap_s, false) as opens
    from lines
),

runs as (
    select
        *,
        sum(opens::integer) over (
            partition by start_id, rank order by ts, line rows between unbounded preceding and current row
        ) as run
    from marked
),

by_run as (
    select
        start_id,
        any_value(deployment) as deployment,
        rank,
        run,
        min(ts) as began,
        max(ts + to_microseconds((w_s * 1e6)::bigint)) as ended,
        sum(w_s) as duration_s,
        count(*) as lines,
        max(waiting) as peak_waiting,
        sum(waiting * w_s) as waiting_request_s,
        sum(kv_usage * w_s) as kv_weighted,
        sum(kv_usage) as kv_sum,
        count(kv_usage) as kv_lines,
        max(running) as peak_running
    from runs
    group by start_id, rank, run
),

merged as (
    select
        *,
        sum(opens::integer) over (
            partition by start_id, rank order by began rows between unbounded preceding and current row
        ) as episode
    from (
        select
            *,
            coalesce(
                epoch_us(began) - epoch_us(lag(ended) over (partition by start_id, rank order by began))
                    > $merge_s * 1e6,
                true
            ) as opens
        from by_run
    )
),

final as (
    select
        start_id,
        any_value(deployment) as deployment,
        rank,
        episode::bigint as episode,
        min(began) as began,
        max(ended) as ended,
        sum(duration_s) as duration_s,
        sum(lines) as lines,
        max(peak_waiting) as peak_waiting,
        sum(waiting_request_s) as waiting_request_s,
        coalesce(sum(kv_weighted) / nullif(sum(duration_s), 0), sum(kv_sum) / nullif(sum(kv_lines), 0))
            as kv_usage_mean,
        max(peak_running) as peak_running
    from merged
    group by start_id, rank, episode
)

select * from final
order by start_id, rank, episode
