"""One error base class with a message a user can act on, and the exit codes the CLI maps them to.

Exit codes (documented in the README): 0 success; 1 internal error (a bug: please report);
2 usage error (bad option or argument); 3 input error (a path that does not exist, nothing readable);
4 store error (store locked by another ingest, unreadable or from a newer version).
"""

from __future__ import annotations


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
