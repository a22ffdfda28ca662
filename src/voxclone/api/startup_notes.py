"""What a server says about its models and its library (issue 46).

At start (api/app.py) each missing model asset is logged with the command
that installs it, and the library id is created in the home; ``GET /readyz``
shows the same assets under ``detail.models`` and the id in the
``X-Voxclone-Library`` header, so neither a smaller catalog nor another
library goes unnoticed.
"""

from __future__ import annotations

from typing import Any

from voxclone.assembly import Runtime
from voxclone.models_location import legacy_note
from voxclone.runtime.library_id import library_id
from voxclone.synth.engine.asset_status import MissingAsset, missing_assets


def runtime_missing_assets(runtime: Runtime) -> list[MissingAsset]:
    return missing_assets((name, stack.engine) for name, stack in runtime.engines.items())


def startup_notes(runtime: Runtime) -> list[str]:
    """Warnings for the start-up log: missing assets, an older models folder."""
    settings = runtime.settings
    notes = [asset.log_line() for asset in runtime_missing_assets(runtime)]
    legacy = legacy_note(settings.home, settings.models_dir)
    if legacy is not None:
        notes.append(legacy)
    return notes


def models_detail(runtime: Runtime) -> dict[str, Any]:
    """/readyz's ``detail.models``: "complete", or "degraded" and what is missing."""
    missing = [asset.status() for asset in runtime_missing_assets(runtime)]
    return {"state": "degraded" if missing else "complete", "missing": missing}


def runtime_library_id(runtime: Runtime) -> str:
    """The id of the library the runtime serves (created in its home on first use)."""
    return library_id(runtime.settings.home, runtime.settings.database_url)
