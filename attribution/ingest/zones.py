"""Time zones of naive log timestamps: the machine's own zone, and checking a zone the user names."""

from __future__ import annotations

import os

from attribution.config import env
from attribution.errors import UsageError


def local_tz() -> str:
    """The machine's IANA zone: $TZ, else /etc/localtime's target, else UTC."""
    tz = (env("TZ") or "").lstrip(":")
    if tz and "/" in tz or tz == "UTC":
        return tz
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    return "UTC"


def resolve_tz(tz: str | None) -> str:
    """The zone an ingest reads naive timestamps in: `tz`, else the machine's; an unknown name is a usage error."""
    tz = tz or local_tz()
    try:
        from zoneinfo import ZoneInfo

        ZoneInfo(tz)
    except (KeyError, ValueError) as exc:
        raise UsageError(f"--tz {tz!r}: not a known time zone (use an IANA name such as Europe/Berlin)") from exc
    return tz
