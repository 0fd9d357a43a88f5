-- Question: which requests does an analysis look at, in which group, and when was each one waiting, running and done?
-- Grain: one row per request of joined_requests whose time span touches the window [$since, $until).
-- Parameters: $since, $until (TIMESTAMPTZ; NULL leaves that end open); $by (workload, model, deployment, label,
--   day (UTC date of arrival), version (engine and engine version) or all).
-- Columns: grp (the request's group under $by, '(none)' where the source does not say), deployment, workload,
--   model, label, in_window (arrival, else finish time, inside the window; with no bound every row is in),
--   ok (status is not error / failed / aborted), arrival, prompt_tokens, output_tokens, cached_tokens,
--   queue_s, ttft_s, tpot_s, e2e_s (seconds; ttft_s = first_token - arrival and e2e_s = finished - arrival where
--   the source gives only timestamps; tpot_s = (e2e_s - ttft_s) / (output_tokens - 1) where the source gives no
--   TPOT and output_tokens > 1), t_arrival, t_admit, t_first, t_end (microseconds since the epoch:
--   t_end = arrival + e2e_s; t_admit = arrival + queue_s, NULL when queue_s is unknown; t_first = arrival +
--   ttft_s kept within [t_admit, t_end]), gateway_source (the gateway format that logged the request, NULL
--   where no gateway did), cost (USD the gateway billed, NULL where it gave no price), file, line (where the
--   row was read: ties in arrival keep file order), block_hashes (prefix-chained block ids, where the source
--   gives them).
with

requests as (
    select * from joined_requests
),

timed as (
    select
        *,
        epoch_us(arrival) as t_arrival,
        coalesce(ttft_s, (epoch_us(first_token) - epoch_us(arrival)) / 1e6) as ttft,
        coalesce(e2e_s, (epoch_us(finished) - epoch_us(arrival)) / 1e6) as e2e
    from requests
),

derived as (
    select
        *,
        coalesce(
            tpot_s,
            case when output_tokens > 1 and e2e >= ttft then (e2e - ttft) / (output_tokens - 1) end
        ) as tpot,
        case when t_arrival is not null and e2e >= 0 then t_arrival + round(e2e * 1e6)::bigint end as t_end
    from timed
),

admitted as (
    select
        *,
        case when t_end is not null and queue_s >= 0
            then least(t_arrival + round(queue_s * 1e6)::bigint, t_end) end as t_admit
    from derived
),

first_token as (
    select
        *,
        case when t_end is not null and ttft >= 0
            then least(greatest(t_arrival + round(ttft * 1e6)::bigint, coalesce(t_admit, t_arrival)), t_end)
        end as t_first
    from admitted
),

grouped as (
    select
        *,
        group_label(
            $by, workload, model, deployment, label, strftime(timezone('UTC', coalesce(arrival, finished)), '%Y-%m-%d'),
            engine, engine_version
        ) as grp,
        coalesce(arrival, finished) as ts_ref
    from first_token
),

final as (
    select
        grp,
        deployment,
        workload,
        model,
        label,
        engine,
        engine_version,
        source_kind,
        coalesce(ts_ref >= $since::timestamptz, $since::timestamptz is null)
            and coalesce(ts_ref < $until::timestamptz, $until::timestamptz is null) as in_window,
        coalesce(status, 'ok') not in ('error', 'failed', 'aborted') as ok,
        arrival,
        prompt_tokens,
        output_tokens,
        cached_tokens,
        queue_s,
        ttft as ttft_s,
        tpot as tpot_s,
        e2e as e2e_s,
        t_arrival,
        t_admit,
        t_first,
        t_end,
        gateway_source,
        cost,
        file,
        line,
        block_hashes
    from grouped
    where ($since::timestamptz is null or coalesce(t_end, t_arrival, epoch_us(ts_ref)) >= epoch_us($since::timestamptz))
      and ($until::timestamptz is null or coalesce(t_arrival, epoch_us(ts_ref)) < epoch_us($until::timestamptz))
)

select * from final
