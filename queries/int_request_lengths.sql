-- Question: how long was each request of the window, prompt, output and cached prefix, as one row per length?
-- Grain: one row per (request of int_analysis_requests in the window, metric) where the source gave that count
--   (UNPIVOT leaves NULL lengths out); materialised as the temporary table int_request_lengths, which
--   length_stats_by_group.sql and length_histogram_by_group.sql read.
-- Parameters: none.
-- Columns: grp, metric (prompt_tokens, output_tokens or cached_tokens), length.
with

requests as (
    select * from int_analysis_requests where in_window
),

final as (
    unpivot (select grp, prompt_tokens, output_tokens, cached_tokens from requests)
    on prompt_tokens, output_tokens, cached_tokens
    into name metric value length
)

select * from final
