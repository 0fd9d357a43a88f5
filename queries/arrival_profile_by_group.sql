-- Question: at which hours of the day and on which weekdays do a group's requests arrive, and how many per hour or
--   per day of that kind?
-- Grain: one row per (group, profile, slot): profile 'hour' (slot 0-23, the local hour of day) or 'weekday'
--   (slot 1-7, ISO weekday, Monday = 1), every slot of the group's span listed.
-- Parameters: $tz (IANA zone the hours and weekdays are read in). Reads int_arrival_times.
-- Columns: grp, profile, slot, name (the hour as 'HH:00' or the weekday's short name), requests (arriving in that
--   slot), share (of the group's requests), slots (clock hours, or calendar days, of that kind from the group's
--   first arrival's to its last's, in $tz), mean (requests / slots: per such hour, or per such day).
-- Not transpiled: `timezone($tz` means either direction by the type of its argument (an instant to the local
--   wall time, or a wall time to its instant), which sqlglot does not carry over: on Spark from_utc_timestamp
--   and to_utc_timestamp (the session's zone is UTC), the spans listed with sequence (inclusive of its end);
--   tests/test_spark.py (the report on Spark) checks the two agree.
with

times as (
-- @duckdb
    select grp, timezone($tz, to_timestamp(t / 1e6)) as local_ts from int_arrival_times
-- @spark
    select grp, from_utc_timestamp(timestamp_micros(cast(t as bigint)), $tz) as local_ts from int_arrival_times
-- @end
),

spans as (
    select grp, min(local_ts) as first_ts, max(local_ts) as last_ts, count(*) as total
    from times
    group by grp
),

hours as (
    -- local clock hours spanned, stepped in UTC so a daylight-saving change neither skips nor repeats one
-- @duckdb
    select grp, hour(timezone($tz, h)) as slot, count(*) as slots
    from (
        select grp, unnest(range(
            date_trunc('hour', timezone($tz, first_ts)), date_trunc('hour', timezone($tz, last_ts))
                + interval 1 hour, interval 1 hour)) as h
-- @spark
    select grp, cast(hour(from_utc_timestamp(h, $tz)) as bigint) as slot, count(*) as slots
    from (
        select grp, explode(sequence(
            date_trunc('hour', to_utc_timestamp(first_ts, $tz)), date_trunc('hour', to_utc_timestamp(last_ts, $tz)),
            interval 1 hour)) as h
-- @end
        from spans
    )
    group by grp, slot
),

days as (
-- @duckdb
    select grp, isodow(d) as slot, count(*) as slots
    from (
        select grp, unnest(range(first_ts::date, last_ts::date + interval 1 day, interval 1 day)) as d from spans
-- @spark
    select grp, cast(extract(dayofweek_iso from d) as bigint) as slot, count(*) as slots
    from (
        select grp, explode(sequence(to_date(first_ts), to_date(last_ts), interval 1 day)) as d from spans
-- @end
    )
    group by grp, slot
),

counts as (
-- @duckdb
    select grp, 'hour' as profile, hour(local_ts) as slot, count(*) as requests from times group by all
    union all
    select grp, 'weekday' as profile, isodow(local_ts) as slot, count(*) as requests from times group by all
-- @spark
    select grp, 'hour' as profile, cast(hour(local_ts) as bigint) as slot, count(*) as requests
    from times group by grp, 3
    union all
    select grp, 'weekday' as profile, cast(extract(dayofweek_iso from local_ts) as bigint) as slot, count(*) as requests
    from times group by grp, 3
-- @end
),

slots as (
    select grp, 'hour' as profile, slot, slots from hours
    union all
    select grp, 'weekday' as profile, slot, slots from days
),

final as (
    select
        s.grp,
        s.profile,
        s.slot,
        case when s.profile = 'hour' then lpad(s.slot::varchar, 2, '0') || ':00'
-- @duckdb
             else ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'][s.slot] end as name,
-- @spark
             else element_at(['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'], cast(s.slot as int)) end as name,
-- @end
        coalesce(c.requests, 0) as requests,
        coalesce(c.requests, 0) / p.total as share,
        s.slots,
        coalesce(c.requests, 0) / s.slots as mean
    from slots as s
    join spans as p on p.grp = s.grp
    left join counts as c on c.grp = s.grp and c.profile = s.profile and c.slot = s.slot
)

select * from final
order by grp = '(all)', grp = '(none)', grp, profile, slot
