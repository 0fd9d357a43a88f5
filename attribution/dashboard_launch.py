"""Starting the dashboard: the `streamlit run` command line for the app in dashboards/, and the store version the
launcher and the app check. Light on purpose: `attribution dashboard` imports this, not the analyses the
pages run (attribution.dashboard), which load in the app's own process."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from attribution.config import environment
from attribution.errors import AttributionError, StoreError
from attribution.store import Store

DEFAULT_PORT = 8501


def app_path() -> Path:
    """dashboards/app.py: shipped in the package as attribution/dashboards (a link to ../dashboards in the
    repository, like attribution/sql -> ../queries), else beside the package in a source checkout."""
    here = Path(__file__).resolve().parent
    for cand in (Path(__file__).parent / "dashboards" / "app.py", here.parent / "dashboards" / "app.py"):
        if cand.is_file():
            return cand
    raise AttributionError(f"the dashboard app is missing: no dashboards/app.py in {here} or {here.parent}")


def command(store: Path, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, config: Path | None = None
            ) -> tuple[list[str], dict[str, str]]:
    """The `streamlit run` command line and environment: bound to `host` only, no browser opened, no usage
    statistics sent, no file watcher; the store reaches the app as $ATTRIBUTION_STORE and a settings file
    as $ATTRIBUTION_CONFIG (the app resolves its settings with config.load_settings, as the CLI does). `-P`
    and a PYTHONPATH without the working directory: a `secrets.py` or `zstandard.py` where the user runs the
    command is never imported (`python -m` would put the working directory first)."""
    from attribution.workers import import_path

    cmd = [
        sys.executable, "-P", "-m", "streamlit", "run", str(app_path()),
        "--server.address", host, "--server.port", str(port), "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
        "--client.toolbarMode", "viewer",
    ]
    env = {**environment(), "ATTRIBUTION_STORE": str(Path(store).resolve()),
           "PYTHONPATH": os.pathsep.join(import_path())}
    env.pop("PYTHONSTARTUP", None)
    if config is not None:
        env["ATTRIBUTION_CONFIG"] = str(Path(config).resolve())
    return cmd, env


def launch(store: Path, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, config: Path | None = None) -> None:
    """Become the app: this process is replaced by `streamlit run`, so Ctrl-C and a service manager's
    SIGTERM reach Streamlit itself (a child would be orphaned when only its parent is signalled)."""
    cmd, env = command(store, host=host, port=port, config=config)
    os.execve(cmd[0], cmd, env)


def store_version(path: str | os.PathLike[str]) -> int | None:
    """The store's last commit (changes whenever an ingest lands data), or None when there is no store."""
    try:
        return Store.open(path).snapshot().version
    except StoreError:
        return None
