"""``voxclone models list | import ENGINE PATH | pull ENGINE``: the models this host runs.

Kokoro comes from packages and is always there. Other engines' weights are
supplied by the operator as verified bundles under ``VOXCLONE_HOME/models``;
``pull`` is a convenience for connected hosts and fails at once offline.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from voxclone.config import Settings
from voxclone.errors import InvalidInput, ModelAssetError


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


def _engine(name: str) -> str:
    from voxclone.synth.engine.models import BUNDLE_ENGINES

    if name not in BUNDLE_ENGINES:
        raise InvalidInput(
            f"engine '{name[:32]}' takes no imported models; these do: {', '.join(BUNDLE_ENGINES)}",
            field="engine",
            limit=list(BUNDLE_ENGINES),
        )
    return name


def cmd_models(args: argparse.Namespace, settings: Settings) -> int:
    models_dir = settings.models_dir
    if args.models_command == "list":
        from voxclone.synth.engine.models import installed_models

        print(f"{'ENGINE':11s} {'MODEL':24s} {'SIZE':>9s}  {'SOURCE':19s} LICENSE / LANGUAGES")
        for info in installed_models(models_dir):
            when = (
                datetime.fromtimestamp(info.imported_at, UTC).strftime("imported %Y-%m-%d")
                if info.imported_at
                else info.source
            )
            print(
                f"{info.engine:11s} {info.name:24s} {_size(info.size_bytes):>9s}  {when:19s} "
                f"{info.license} / {', '.join(info.languages)}"
            )
        return 0

    engine = _engine(args.engine)
    from voxclone.synth.engine.pocket.bundle import MANIFEST, install_bundle
    from voxclone.synth.engine.pocket.hub import bundle_from_files, pull
    from voxclone.synth.engine.pocket.loading import check_bundle

    try:
        with tempfile.TemporaryDirectory(prefix="voxclone-models-") as tmp:
            if args.models_command == "pull":
                print(f"contacting the model hub for {engine} ({args.config}) …", file=sys.stderr)
                source = Path(tmp) / "bundle"
                pull(args.config, source, timeout=args.timeout)
            else:
                source = Path(args.path).expanduser()
                if source.is_dir() and not (source / MANIFEST).exists() and args.config:
                    built = Path(tmp) / "bundle"
                    bundle_from_files(source, args.config, built)
                    source = built
            models_dir.mkdir(parents=True, exist_ok=True)
            installed = install_bundle(source, models_dir, engine=engine, check=check_bundle)
    except OSError as exc:
        # A full disk, a folder this user may not write: one line, like a bad bundle.
        raise ModelAssetError(
            f"cannot install the model: {exc.strerror or exc.__class__.__name__}"
            + (f" ({Path(exc.filename).name})" if isinstance(exc.filename, str) else "")
        ) from None
    m = installed.manifest
    print(
        f"installed {engine} model '{m.name}' ({_size(m.size)}, {len(m.files)} files, "
        f"SHA-256 verified; languages {', '.join(m.languages)}; "
        f"license {', '.join(f'{k} {v}' for k, v in sorted(m.license.items()))})"
    )
    return 0
