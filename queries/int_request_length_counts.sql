-- Question: how many requests of the window had each prompt, output and cached length per group?
-- Grain: one row per (grp, metric, length) among the requests of int_analysis_requests in the window, where the
--   source gave that count (UNPIVOT leaves NULL lengths out). Materialised as the temporary table
--   int_request_length_counts, which the lengths analysis (attribution.analyses.lengths) puts behind the
--   temporary view int_length_counts for length_stats_from_counts.sql and length_histogram_from_counts.sql:
--   the rows int_length_counts.sql gives from the per-day counts, here of any window.
-- Parameters: none.
-- Columns: grp, metric (prompt_tokens, output_tokens or cached_tokens), length, n (requests of that length).
with

requests as (
    select * from int_analysis_requests where in_window
),

long as (
    unpivot (select grp, prompt_tokens, output_tokens, cached_tokens from requests)
    on prompt_tokens, output_tokens, cached_tokens
    into name metric value length
),

final as (
    select grp, metric, length, count(*) as n
    from long
    group by grp, metric, length
)

select * from final
