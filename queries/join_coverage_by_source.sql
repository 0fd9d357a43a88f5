-- Question: how many requests of each source found their other half (engine <-> gateway)?
-- Grain: one row per (side, source).
-- Parameters: none.
-- Columns: side (engine / gateway / trace / bench), source, requests, matched, unmatched, matched_share.
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
        count(*) filter (where ok) as matched,
        count(*) filter (where not ok) as unmatched,
        round(count(*) filter (where ok) / count(*), 4) as matched_share
    from sides
    group by all
)

select * from final
order by side, source
