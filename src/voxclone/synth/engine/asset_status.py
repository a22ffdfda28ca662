"""What an engine is missing of its model files, so a server says so instead
of silently serving less (issue 46).

An engine may define ``missing_assets() -> list[MissingAsset]`` (duck-typed:
an engine without it is taken as complete). Kokoro's says when its 54 standard
voice packs are not installed: the catalog is then the 7 earlier built-ins
and cloning searches fewer voices. The server logs each entry at start and
``GET /readyz`` lists them under ``detail.models`` (api/routes_admin.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class MissingAsset:
    engine: str
    capability: str  # what is degraded: "voices", "cloning", ...
    what: str  # one sentence: what is missing and what it costs (no paths: /readyz shows it)
    fix: str  # the command that installs it (then restart); takes --models-dir
    models_dir: Path  # where it was looked for (the start-up log names it, /readyz does not)

    def log_line(self) -> str:
        return (
            f"{self.engine}: {self.what}; install with `{self.fix} --models-dir "
            f"{self.models_dir}` and restart"
        )

    def status(self) -> dict[str, str]:
        """What /readyz shows: no paths."""
        return {
            "engine": self.engine,
            "capability": self.capability,
            "state": "degraded",
            "missing": self.what,
            "fix": f"{self.fix}, then restart",
        }


def missing_assets(engines: Iterable[tuple[str, Any]]) -> list[MissingAsset]:
    """The missing assets of ``(name, engine)`` pairs, in their order."""
    found: list[MissingAsset] = []
    for _, engine in engines:
        check = getattr(engine, "missing_assets", None)
        if callable(check):
            found.extend(check())
    return found
