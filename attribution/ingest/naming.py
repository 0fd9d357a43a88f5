"""Deployment naming: which deployment a file belongs to when --deployment is not given (its name, else its
directory's; the pod of a Kubernetes node path, the container of a Docker one)."""

from __future__ import annotations

import re
from pathlib import Path

_GENERIC_STEMS = {"vllm", "sglang", "server", "vllm_server", "sglang_server", "log", "logs", "output", "stdout",
                  "stderr", "console", "serve", "engine", "current", "latest", "access", "gateway", "litellm"}


_K8S_PATH_RE = re.compile(
    r"(?:/pods/[^/_]+_(?P<pod>[^/_]+)_[^/_]+/[^/]+/\d+\.log(?:\.\d{8}-\d{6})?(?:\.gz)?$"
    r"|/containers/(?P<pod2>[^/_]+)_[^/_]+_[^/]+-[0-9a-f]{64}\.log$)")
_DOCKER_PATH_RE = re.compile(r"/containers/([0-9a-f]{64})/\1-json\.log(?:\.\d+)?(?:\.gz)?$")
# A periodic /metrics snapshot (`metrics-<unix or ISO time>.prom`): one folder per pod names the deployment.
_SNAPSHOT_RE = re.compile(r"^metrics[-_][0-9T:.\-+Z]+\.(?:prom|txt)(?:\.gz)?$", re.I)


def default_deployment(path: Path) -> str:
    """The deployment a file belongs to when --deployment is not given: the file name without compression,
    rotation (`.1`, `-20260507`) and type suffixes; when that name is generic (`vllm.log`, `server.log`,
    `stdout`), the name of the directory holding it (one directory per pod is the usual layout). Kubernetes
    node paths give the pod (`/var/log/pods/<ns>_<pod>_<uid>/<container>/0.log[.<date>][.gz]`,
    `/var/log/containers/<pod>_<ns>_<container>-<id>.log`) and Docker's the container id's first 12 digits
    (`/var/lib/docker/containers/<id>/<id>-json.log[.N][.gz]`); a /metrics snapshot named for its scrape time
    (`metrics-<time>.prom`) the name of its folder."""
    for p in (str(path), str(path.resolve())):
        if m := _K8S_PATH_RE.search(p):
            return m.group("pod") or m.group("pod2")
        if m := _DOCKER_PATH_RE.search(p):
            return m.group(1)[:12]
    name = path.name
    if _SNAPSHOT_RE.match(name):
        return path.resolve().parent.name or "default"
    name = re.sub(r"\.(gz|zst|zstd)$", "", name)
    name = re.sub(r"(\.\d+)+$", "", name)
    name = re.sub(r"\.(log|txt|jsonl|ndjson|json|csv|out|err|parquet)$", "", name)
    name = re.sub(r"[-_.]\d{8}(?:[-_T]?\d{2,6})?$", "", name)
    name = re.sub(r"\.(log|txt|jsonl|ndjson|json|out|err)$", "", name)  # `0.log.20260501-120000`
    if not name or name.lower() in _GENERIC_STEMS or name.isdigit():  # `0.log`: a restart count, not a name
        parent = path.resolve().parent.name
        return parent or name or "default"
    return name
