"""Bombs refused before unpacking, through `voxclone models import` in a child with a file-
size limit (moved from tests/unit/test_bundle_unpack.py, issue 51).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from test_bundle_unpack import (  # tests/unit (conftest.py)
    BIG,
    CONFIG,
    WRITE_LIMIT,
    MiB,
    _config_entry,
    _manifest,
    _one_line_error,
    _tgz,
    _zeros_sha,
    _zip,
)


def _import_limited(archive: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``voxclone models import pocket-tts ARCHIVE`` in a child that cannot write
    a file past WRITE_LIMIT (it gets EFBIG, not a signal)."""
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (WRITE_LIMIT, WRITE_LIMIT))

    env = {**os.environ, "VOXCLONE_HOME": str(tmp_path / "home"), "TMPDIR": str(temp)}
    env.pop("VOXCLONE_DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "voxclone.api.cli", "models", "import", "pocket-tts", str(archive)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
        check=False,
    )


@pytest.mark.parametrize("build", [_zip, _tgz])
def test_a_listed_bomb_is_refused_before_it_is_unpacked(
    build: Callable[[Path, dict[str, bytes | int]], Path], tmp_path: Path
) -> None:
    """A manifest that lists 128 MiB of zeros, hash and size right: refused by
    its expansion (archive ~130 KB) before a byte is written."""
    manifest = _manifest(
        {"config.yaml": _config_entry(), "model.safetensors": (_zeros_sha(BIG), BIG)}
    )
    suffix = ".zip" if build is _zip else ".tar.gz"
    archive = build(
        tmp_path / f"bomb{suffix}",
        {"bomb/model.safetensors": BIG, "bomb/manifest.json": manifest, "bomb/config.yaml": CONFIG},
    )
    assert archive.stat().st_size < 2 * MiB
    line = _one_line_error(_import_limited(archive, tmp_path))
    total = BIG + len(manifest) + len(CONFIG)
    assert "decompression bomb" in line and f"would unpack to {total} bytes" in line
    assert list((tmp_path / "tmp").iterdir()) == []  # nothing left behind either


def test_an_unlisted_big_member_is_refused_before_it_is_unpacked(tmp_path: Path) -> None:
    manifest = _manifest({"config.yaml": _config_entry()})
    archive = _zip(
        tmp_path / "junk.zip",
        {"junk.bin": BIG, "manifest.json": manifest, "config.yaml": CONFIG},
    )
    line = _one_line_error(_import_limited(archive, tmp_path))
    assert "unknown file 'junk.bin'" in line
