"""Stores in object storage, for reading: `--store s3://bucket/prefix` (also gs://, gcs://, abfs://, az://)
through fsspec (s3fs, gcsfs, adlfs: the `[s3]`, `[gcs]`, `[azure]` extras), which DuckDB reads through
`register_filesystem` (its own httpfs extension downloads from the internet at first use, which offline
machines and CI cannot). Credentials come from each library's usual environment (AWS_*, GOOGLE_*, AZURE_*);
`$ATTRIBUTION_S3_ENDPOINT` points s3fs at an S3-compatible endpoint (MinIO, a local test server). Writing
stays local: ingest into a directory and copy it up (`aws s3 sync`, `gsutil rsync`, `azcopy sync`)."""

from __future__ import annotations

import os
import re
from typing import Any

from attribution.config import env
from attribution.errors import StoreError

_URL_RE = re.compile(r"^([a-z][a-z0-9+.-]*)://", re.I)
PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "abfs": "adlfs", "abfss": "adlfs",
            "az": "adlfs"}
EXTRAS = {"s3fs": "s3", "gcsfs": "gcs", "adlfs": "azure"}


def url_of(root: str | os.PathLike[str]) -> str | None:
    """`root` as an object-store URL without a trailing slash, or None for a local path (file:// is local)."""
    s = os.fspath(root)
    m = _URL_RE.match(s)
    if not m or m.group(1).lower() == "file":
        return None
    if m.group(1).lower() not in PACKAGES:
        raise StoreError(f"{s}: unsupported store URL scheme {m.group(1)}:// (supported: "
                         f"{', '.join(sorted(PACKAGES))}, or a local path)")
    return s.rstrip("/")


def filesystem(url: str) -> Any:
    """The fsspec filesystem for `url` (an ImportError names the extra to install)."""
    scheme = url.split("://", 1)[0].lower()
    package = PACKAGES[scheme]
    try:
        import fsspec
        __import__(package)
    except ImportError as exc:
        raise StoreError(f"{url}: reading {scheme}:// stores needs {package}: "
                         f"pip install 'attribution[{EXTRAS[package]}]'") from exc
    opts: dict[str, Any] = {}
    if package == "s3fs" and env("ATTRIBUTION_S3_ENDPOINT"):
        opts["client_kwargs"] = {"endpoint_url": env("ATTRIBUTION_S3_ENDPOINT")}
    # (a fresh instance: fsspec caches instances and their listings, a reader wants the store as it is now)
    return fsspec.filesystem(scheme, skip_instance_cache=True, use_listings_cache=False, **opts)


class Remote:
    """The read side of a store at an object-store URL: the marker, the log and the data files' URLs."""

    def __init__(self, url: str):
        self.url = url
        self.fs = filesystem(url)

    def _key(self, rel: str) -> str:
        return f"{self.url}/{rel}"

    def read_text(self, rel: str) -> str | None:
        try:
            return self.fs.cat_file(self._key(rel)).decode()
        except FileNotFoundError:
            return None

    def listdir(self, rel: str) -> list[str]:
        try:
            return [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self._key(rel), detail=False)]
        except FileNotFoundError:
            return []

    def exists(self) -> bool:
        return bool(self.fs.exists(self.url))

    def resolver(self) -> Any:
        """A function store-relative data path -> URL DuckDB reads: under `data/`, else under `_trash/` (one
        listing of each, not one request per file)."""
        from attribution import layout

        bucket = self.url.split("://", 1)[1]
        present = {p[len(bucket) + 1:] for sub in ("data", layout.TRASH)
                   for p in self.fs.find(self._key(sub)) if p.startswith(bucket + "/")}

        def resolve(rel: str) -> str:
            return self._key(rel if rel in present or layout.trash_path(rel) not in present
                             else layout.trash_path(rel))
        return resolve

    def register(self, con: Any) -> None:
        con.register_filesystem(self.fs)
