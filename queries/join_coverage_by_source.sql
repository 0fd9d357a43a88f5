-- Question: how many requests of each source found their other half (engine <-> gateway)?
-- Grain: one row per (side, source).
-- Parameters: none.
-- Columns: side (engine / gateway / trace / bench), source, requests, matched, unmatched, matched_share
--   (null for traces and benchmarks, which have no other half).
with

sides as (
    select 'engine' as side, engine_source as source, matched = 'both' as ok
    from joined_requests where engine_source is not null
    union all
    select 'gateway', gateway_source, matched = 'both'
    from joined_requests where gateway_source is not null
    union all
    select matched, source, false
    from joined_requests where matched in ('trace', 'bench')
),

final as (
    select side, source, count(*) as requests,
        -- traces and benchmarks have no other half: their match counts are not applicable (null)
        case when side in ('engine', 'gateway') then count(*) filter (where ok) end as matched,
        case when side in ('engine', 'gateway') then count(*) filter (where not ok) end as unmatched,
        case when side in ('engine', 'gateway') then round(count(*) filter (where ok) / count(*), 4) end
            as matched_share
    from sides
    group by side, source
)

select * from final
order by side, source
