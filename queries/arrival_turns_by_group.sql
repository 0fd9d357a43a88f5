-- Question: how many turns do conversations have per group, how many requests are follow-ups, and how long is it
--   between turns?
-- Grain: one row per group holding requests with block hashes (conversations found by int_arrival_turns), and
--   with $overall one row '(all)'. A conversation belongs to the group of its first turn.
-- Parameters: $overall (BOOLEAN).
-- Columns: grp, requests (with block hashes), conversations, multi_turn (conversations of 2 or more turns),
--   follow_up_share (requests that are not a first turn / requests), single_turn_share (of conversations),
--   turns_mean, turns_p50, turns_p90, turns_max, gap_p10_s, gap_p50_s, gap_p90_s (arrival to the next turn's
--   arrival, seconds), think_p50_s (previous turn's finish to the next turn's arrival, where the finish is known;
--   NULL otherwise), think_known (turn pairs with a known finish). Quantiles: quantile_cont (linear).
with

turns as (
    select * from int_arrival_turns
),

conversations as (
    select r.grp, t.root, count(*) as turns
    from turns as t
    join turns as r on r.id = t.root
    group by r.grp, t.root
),

steps as (
    select c.grp, (c.t - p.t) / 1e6 as gap_s, (c.t - p.t_end) / 1e6 as think_s
    from turns as c
    join turns as p on p.id = c.parent
),

grouped_conversations as (
    select grp, turns from conversations
    union all
    select '(all)' as grp, turns from conversations where $overall::boolean
),

grouped_steps as (
    select grp, gap_s, think_s from steps
    union all
    select '(all)' as grp, gap_s, think_s from steps where $overall::boolean
),

conversation_stats as (
    select
        grp,
        sum(turns)::bigint as requests,
        count(*) as conversations,
        count(*) filter (where turns > 1) as multi_turn,
        (sum(turns) - count(*)) / sum(turns) as follow_up_share,
        count(*) filter (where turns = 1) / count(*) as single_turn_share,
        avg(turns) as turns_mean,
        quantile_cont(turns, 0.5) as turns_p50,
        quantile_cont(turns, 0.9) as turns_p90,
        max(turns) as turns_max
    from grouped_conversations
    group by grp
),

step_stats as (
    select
        grp,
        quantile_cont(gap_s, 0.1) as gap_p10_s,
        quantile_cont(gap_s, 0.5) as gap_p50_s,
        quantile_cont(gap_s, 0.9) as gap_p90_s,
        quantile_cont(think_s, 0.5) as think_p50_s,
        count(think_s) as think_known
    from grouped_steps
    group by grp
),

final as (
    select
        c.*,
        s.gap_p10_s,
        s.gap_p50_s,
        s.gap_p90_s,
        s.think_p50_s,
        coalesce(s.think_known, 0) as think_known
    from conversation_stats as c
    left join step_stats as s on s.grp = c.grp
)

select * from final
order by grp = '(all)', grp = '(none)', grp
