"""One error base class with a message a user can act on, and the exit codes the CLI maps them to.

Exit codes (documented in the README): 0 success; 1 internal error (a bug: please report);
2 usage error (bad option or argument); 3 input error (a path that does not exist, nothing readable);
4 store error (store locked by another ingest, unreadable or from a newer version); 5 `report --fail-on`
held (attribution.report.EXIT_FOUND); 6 `ingest` committed what it could read but some inputs were not (fully)
read: failed, skipped (not a regular file, dangling symlink, unreadable) or vanished (EXIT_INPUTS_NOT_READ).
"""

from __future__ import annotations

EXIT_INPUTS_NOT_READ = 6


class AttributionError(Exception):
    exit_code = 1


class UsageError(AttributionError):
    exit_code = 2


class InputError(AttributionError):
    exit_code = 3


class StoreError(AttributionError):
    exit_code = 4


class StoreLocked(StoreError):
    pass
