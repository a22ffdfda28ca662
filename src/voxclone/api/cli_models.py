"""``voxclone models list | import ENGINE PATH | pull ENGINE``: the models this host runs.

Kokoro comes from packages and is always there. Other engines' weights are
supplied by the operator as verified bundles under ``VOXCLONE_HOME/models``;
``pull`` is a convenience for connected hosts and fails at once offline.
Each engine's package does its own part (``model_manager()``, found through
the engine registry: synth/engine/models.py); this module imports no
engine's package.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxclone.config import Settings
from voxclone.errors import InvalidInput, ModelAssetError

if TYPE_CHECKING:  # pragma: no cover
    from voxclone.synth.engine.models import ModelManager


def add_models_parser(subparsers: Any) -> argparse.ArgumentParser:
    models = subparsers.add_parser("models", help="list, import or pull TTS models")
    msub = models.add_subparsers(dest="models_command", required=True)
    msub.add_parser("list", help="installed models: size, license, languages")
    imp = msub.add_parser("import", help="verify and install a model bundle (directory or archive)")
    imp.add_argument("engine", help="engine the bundle is for (pocket-tts)")
    imp.add_argument("path", help="bundle directory, .tar/.tar.gz/.tgz/.zip archive, or hub files")
    imp.add_argument(
        "--config",
        help="for a directory of hub files without manifest.json: the package config "
        "they belong to (english, french, german, …)",
    )
    pull = msub.add_parser("pull", help="download a model from its hub (needs internet)")
    pull.add_argument("engine", help="pocket-tts")
    pull.add_argument("--config", default="english", help="package config (default: english)")
    pull.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for the hub")
    return models


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n = n / 1024  # type: ignore[assignment]
    return "-"


def _manager(name: str) -> ModelManager:
    """The model manager of an engine whose weights the operator installs."""
    from voxclone.synth.engine.models import managers
    from voxclone.synth.engine.registry import model_manager

    # Only that engine's package is imported (others may be slow to import
    # or write files of their own); all of them only to name them in the error.
    manager = model_manager(name)
    if manager is None or not manager.imports:
        found = [m.engine for m in managers() if m.imports]
        raise InvalidInput(
            f"engine '{name[:32]}' takes no imported models; these do: {', '.join(found)}",
            field="engine",
            limit=found,
        )
    return manager


def cmd_models(args: argparse.Namespace, settings: Settings) -> int:
    models_dir = settings.models_dir
    if args.models_command == "list":
        from voxclone.synth.engine.models import model_listing

        listing = model_listing(models_dir)
        print(f"{'ENGINE':11s} {'MODEL':24s} {'SIZE':>9s}  {'SOURCE':19s} LICENSE / LANGUAGES")
        for info in listing.models:
            when = (
                datetime.fromtimestamp(info.imported_at, UTC).strftime("imported %Y-%m-%d")
                if info.imported_at
                else info.source
            )
            print(
                f"{info.engine:11s} {info.name:24s} {_size(info.size_bytes):>9s}  {when:19s} "
                f"{info.license} / {', '.join(info.languages)}"
            )
        for broken in listing.broken:
            # A plug-in that raises at import is named with its error, not a traceback.
            print(f"{broken.engine:11s} {'BROKEN':24s} {'-':>9s}  {'-':19s} {broken.error}")
        return 0

    manager = _manager(args.engine)
    engine = manager.engine
    try:
        if args.models_command == "pull":
            print(f"contacting the model hub for {engine} ({args.config}) …", file=sys.stderr)
            m = manager.pull(args.config, models_dir, timeout=args.timeout)
        else:
            source = Path(args.path).expanduser()
            m = manager.import_model(source, models_dir, config=args.config)
    except OSError as exc:
        # A full disk, a folder this user may not write: one line, like a bad bundle.
        raise ModelAssetError(
            f"cannot install the model: {exc.strerror or exc.__class__.__name__}"
            + (f" ({Path(exc.filename).name})" if isinstance(exc.filename, str) else "")
        ) from None
    print(
        f"installed {engine} model '{m.name}' ({_size(m.size_bytes)}, {m.files} files, "
        f"SHA-256 verified; languages {', '.join(m.languages)}; "
        f"license {', '.join(f'{k} {v}' for k, v in sorted(m.license.items()))})"
    )
    return 0
