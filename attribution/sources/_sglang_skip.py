"""Lines of an SGLang console log that are known and carry nothing for us (`Source.skip_rules`, for the line
census): start-up steps whose figures no table holds, uvicorn's lifecycle, progress bars, weight-loading
chatter, warnings, tracebacks, shutdown. Each rule is (reason, regex searched in the line's text).
"""

from __future__ import annotations

SKIP_RULES: tuple[tuple[str, str], ...] = (
    (
        "start-up step",
        r"(?:^|\] |: )(?:Load weight begin|Init torch distributed|Capture .*graph (?:begin|end)|Using model weights "
        r"format|Attention backend not (?:explicitly )?specified|Init (?:Unified )?RadixTree|Tree cache "
        r"initialized|Using default (?:HuggingFace chat template|chat sampling params)|Auto-detected template|"
        r"Found local HF snapshot|The server is fired up|Max running requests is reset|Hybrid swa model|"
        r"Initialized \w+ draft runner|\w+ draft runner ready|Overriding draft attention backend|Using \w+MoEMethod|"
        r"server_args\.py|Capturing batches|Load weight)",
    ),
    (
        "uvicorn lifecycle",
        r"INFO:\s+(?:Started server process|Waiting for application (?:startup|shutdown)|Application (?:startup|"
        r"shutdown) complete|Uvicorn running on|Shutting down|Finished server process)",
    ),
    ("progress bar", r"\d+%\|[^|]*\||Completed \| \d+/\d+ \["),
    ("weight loading", r"Parameter \S+ not found in params_dict|Unrecognized keys in `rope_parameters`"),
    ("warning", r"(?:Warning|WARNING|UserWarning|FutureWarning|DeprecationWarning|warnings\.warn\(|is deprecated)"),
    ("traceback", r"^(?:Traceback \(most recent call last\)|\s+File \"|\s{2,}\S)"),
    (
        "shutdown",
        r"(?:SIGTERM|SIGQUIT) received|crashed with exit code|crash diagnostics|No live scheduler processes",
    ),
    ("retraction", r"KV cache pool is full\. Retract requests"),
    ("ray dedup hint", r"Ray deduplicates logs by default"),
)
