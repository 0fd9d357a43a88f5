-- Question: at which hours of the day and on which weekdays do a group's requests arrive, and how many per hour or
--   per day of that kind?
-- Grain: one row per (group, profile, slot): profile 'hour' (slot 0-23, the local hour of day) or 'weekday'
--   (slot 1-7, ISO weekday, Monday = 1), every slot of the group's span listed.
-- Parameters: :tz (IANA zone the hours and weekdays are read in). Reads int_arrival_times.
-- Columns: grp, profile, slot, name, requests, share, slots, mean: as queries/arrival_profile_by_group.sql.
-- Engine: the Spark form of queries/arrival_profile_by_group.sql, the same rows: an instant read in $tz is
--   from_utc_timestamp, a local wall time back to its instant to_utc_timestamp (the session's zone is UTC);
--   the spans listed with sequence (inclusive of its end); tests/test_spark_report.py checks the two agree.
-- Dialect: spark
-- Not transpiled: `timezone($tz` means either direction by the type of its argument (an instant to the local wall
--   time, or a wall time to its instant), which sqlglot does not carry over.
with

times as (
    select grp, from_utc_timestamp(timestamp_micros(cast(t as bigint)), :tz) as local_ts from int_arrival_times
),

spans as (
    select grp, min(local_ts) as first_ts, max(local_ts) as last_ts, count(*) as total
    from times
    group by grp
),

hours as (
    -- local clock hours spanned, stepped in UTC so a daylight-saving change neither skips nor repeats one
    select grp, cast(hour(from_utc_timestamp(h, :tz)) as bigint) as slot, count(*) as slots
    from (
        select grp, explode(sequence(
            date_trunc('hour', to_utc_timestamp(first_ts, :tz)), date_trunc('hour', to_utc_timestamp(last_ts, :tz)),
            interval 1 hour)) as h
        from spans
    )
    group by grp, slot
),

days as (
    select grp, cast(extract(dayofweek_iso from d) as bigint) as slot, count(*) as slots
    from (
        select grp, explode(sequence(to_date(first_ts), to_date(last_ts), interval 1 day)) as d from spans
    )
    group by grp, slot
),

counts as (
    select grp, 'hour' as profile, cast(hour(local_ts) as bigint) as slot, count(*) as requests
    from times group by grp, 3
    union all
    select grp, 'weekday' as profile, cast(extract(dayofweek_iso from local_ts) as bigint) as slot, count(*) as requests
    from times group by grp, 3
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
        case when s.profile = 'hour' then lpad(cast(s.slot as string), 2, '0') || ':00'
             else element_at(array('Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'), cast(s.slot as int)) end as name,
        coalesce(c.requests, 0) as requests,
        coalesce(c.requests, 0) / p.total as share,
        s.slots,
        coalesce(c.requests, 0) / s.slots as mean
    from slots as s
    join spans as p on p.grp = s.grp
    left join counts as c on c.grp = s.grp and c.profile = s.profile and c.slot = s.slot
)

select * from final
order by grp = '(all)', grp = '(none)', grp nulls last, profile, slot
