-- Question: how fast and how bursty do requests arrive per group: rate, per-minute counts, gap spread, dispersion?
-- Grain: one row per group of int_arrival_times (queries/int_arrival_times.sql); minutes from int_arrival_minutes.
-- Parameters: none.
-- Columns: grp, requests, first_arrival, last_arrival, span_s (last - first arrival), rate_per_s (requests /
--   span_s), minutes (clock-aligned UTC minutes from the first arrival's to the last's, empty ones included),
--   rpm_min, rpm_p50, rpm_p99, rpm_max, rpm_mean (requests per such minute; quantile_cont: linear interpolation,
--   numpy's default), peak_to_mean (rpm_max / rpm_mean), gap_cv (population standard deviation / mean of the
--   gaps between consecutive arrivals, zero gaps of tied arrivals included), zero_gap_share (share of those gaps
--   that are 0), burstiness ((gap_cv - 1) / (gap_cv + 1)), idc_1s, idc_10s, idc_60s (index of dispersion:
--   population variance / mean of the counts in clock-aligned windows of 1, 10 and 60 s from the first
--   arrival's window to the last's, empty ones included), longest_gap_s, longest_gap_start (the arrival that
--   began the longest gap).
with

times as (
    select * from int_arrival_times
),

stats as (
    select
        grp,
        count(*) as requests,
        min(t) as first_t,
        max(t) as last_t,
        avg(gap_s) as gap_mean,
        stddev_pop(gap_s) as gap_sd,
        count(gap_s) filter (where gap_s = 0) / nullif(count(gap_s), 0) as zero_gap_share,
        max(gap_s) as longest_gap_s,
        arg_max(t - round(gap_s * 1e6)::bigint, gap_s) as longest_gap_from
    from times
    group by grp
),

minute_counts as (
    select grp, requests as n from int_arrival_minutes
),

minute_stats as (
    select
        grp,
        count(*) as minutes,
        min(n) as rpm_min,
        quantile_cont(n, 0.5) as rpm_p50,
        quantile_cont(n, 0.99) as rpm_p99,
        max(n) as rpm_max,
        avg(n) as rpm_mean
    from minute_counts
    group by grp
),

windows as (
    select grp, w, t // (w * 1000000) as k, count(*) as n
    from times, (select unnest([1, 10, 60]) as w)
    group by grp, w, k
),

dispersion as (
    -- empty windows count as 0: with W windows spanned, mean = sum(n) / W and variance = sum(n^2) / W - mean^2
    select
        grp,
        w,
        sum(n) / (max(k) - min(k) + 1) as mean_n,
        sum(n * n) / (max(k) - min(k) + 1) - (sum(n) / (max(k) - min(k) + 1)) ^ 2 as var_n
    from windows
    group by grp, w
),

idc as (
    select
        grp,
        max(var_n / mean_n) filter (where w = 1) as idc_1s,
        max(var_n / mean_n) filter (where w = 10) as idc_10s,
        max(var_n / mean_n) filter (where w = 60) as idc_60s
    from dispersion
    group by grp
),

final as (
    select
        s.grp,
        s.requests,
        to_timestamp(s.first_t / 1e6) as first_arrival,
        to_timestamp(s.last_t / 1e6) as last_arrival,
        (s.last_t - s.first_t) / 1e6 as span_s,
        case when s.last_t > s.first_t then s.requests / ((s.last_t - s.first_t) / 1e6) end as rate_per_s,
        m.minutes,
        m.rpm_min,
        m.rpm_p50,
        m.rpm_p99,
        m.rpm_max,
        m.rpm_mean,
        m.rpm_max / m.rpm_mean as peak_to_mean,
        s.gap_sd / nullif(s.gap_mean, 0) as gap_cv,
        s.zero_gap_share,
        (s.gap_sd / nullif(s.gap_mean, 0) - 1) / (s.gap_sd / nullif(s.gap_mean, 0) + 1) as burstiness,
        i.idc_1s,
        i.idc_10s,
        i.idc_60s,
        s.longest_gap_s,
        to_timestamp(s.longest_gap_from / 1e6) as longest_gap_start
    from stats as s
    join minute_stats as m on m.grp = s.grp
    join idc as i on i.grp = s.grp
)

select * from final
order by grp = '(all)', grp = '(none)', grp
