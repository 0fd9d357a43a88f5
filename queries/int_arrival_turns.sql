-- Question: which requests continue an earlier request's conversation, told by their prefix-chained block hashes?
-- Grain: one row per request of int_analysis_requests that arrived in the window and has block_hashes.
-- Parameters: none.
-- Columns: grp, deployment, id (position in arrival order; ties keep file and line order), t (arrival, us since
--   the epoch), t_end (finish, NULL where unknown), parent (id of the turn it follows, NULL for a first turn),
--   root (id of its conversation's first turn), turn (1 for the first turn).
-- A request follows the latest earlier request of the same file whose hash ids (all of them, or all but the last)
--   are a prefix of its own and at least 2 blocks long. Block hashes are prefix-chained (the id of block i names
--   blocks 0..i), so "is a prefix" is "the parent's last (or last but one) id sits at the same position in the
--   child's list". Hash ids are compared within one file: public traces number them per file.
with recursive

requests as (
    select
        row_number() over (order by t_arrival, file, line) as id,
        grp, deployment, file, t_arrival as t, t_end, block_hashes as h
    from int_analysis_requests
    where in_window and t_arrival is not null and len(block_hashes) > 0
),

prefix_keys as (
    select id as pid, file, h[len(h)] as k, len(h) as plen from requests where len(h) >= 2
    union all
    select id as pid, file, h[len(h) - 1] as k, len(h) - 1 as plen from requests where len(h) >= 3
),

positions as (
    select id, file, unnest(h) as k, generate_subscripts(h, 1) as i from requests
),

parents as (
    select p.id, max(k.pid) as parent
    from positions as p
    join prefix_keys as k on k.file = p.file and k.k = p.k and k.plen = p.i and k.pid < p.id
    group by p.id
),

linked as (
    select r.id, r.grp, r.deployment, r.t, r.t_end, p.parent
    from requests as r
    left join parents as p on p.id = r.id
),

chains(id, root, turn) as (
    select id, id as root, 1 as turn from linked where parent is null
    union all
    select l.id, c.root, c.turn + 1
    from linked as l
    join chains as c on l.parent = c.id
),

final as (
    select l.grp, l.deployment, l.id, l.t, l.t_end, l.parent, c.root, c.turn
    from linked as l
    join chains as c on c.id = l.id
)

select * from final
