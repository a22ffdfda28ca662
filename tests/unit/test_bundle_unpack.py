"""``voxclone models import`` of hostile archives and manifests (issue 37): a
1.5 MB archive wrote ~1.07 GB to the temp folder before it was refused, and a
deep or non-finite manifest crashed the CLI with a traceback.

The archives are built here. The bombs are imported by the real CLI in a child
process whose files may not grow past :data:`WRITE_LIMIT` (RLIMIT_FSIZE): an
import that unpacked first and checked after fails on that limit instead of
saying what was wrong with the archive.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from voxclone.api.cli import main
from voxclone.synth.engine.pocket import unpack
from voxclone.synth.engine.pocket.bundle import BundleError, install_bundle
from voxclone.synth.json_limits import JSONLimitError, load_json

MiB = 1 << 20
BIG = 128 * MiB  # zeros: ~130 KB deflated
WRITE_LIMIT = 16 * MiB
CONFIG = b"name: tiny\n"


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def _zeros_sha(size: int) -> str:
    digest, chunk = hashlib.sha256(), bytes(MiB)
    for _ in range(size // MiB):
        digest.update(chunk)
    return digest.hexdigest()


def _manifest(files: dict[str, tuple[str, int]], **extra: object) -> bytes:
    return json.dumps(
        {
            "format": 1,
            "engine": "pocket-tts",
            "name": "bomb",
            "version": "1",
            "languages": ["en-us"],
            "files": {n: {"sha256": sha, "bytes": size} for n, (sha, size) in files.items()},
            **extra,
        }
    ).encode()


def _zip(path: Path, members: dict[str, bytes | int]) -> Path:
    """``members``: name -> bytes, or a size in bytes of zeros (streamed)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            if isinstance(data, bytes):
                archive.writestr(name, data)
                continue
            with archive.open(name, "w") as out:
                for _ in range(data // MiB):
                    out.write(bytes(MiB))
    return path


def _tgz(path: Path, members: dict[str, bytes | int]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(data, bytes):
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
            else:
                info.size = data
                archive.addfile(info, io.BufferedReader(_Zeros(data)))
    return path


def _config_entry() -> tuple[str, int]:
    return hashlib.sha256(CONFIG).hexdigest(), len(CONFIG)


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("voxclone: error: "), result.stderr
    return lines[0]


def test_a_member_whose_size_differs_from_the_manifest_is_refused(tmp_path: Path) -> None:
    sha, size = _config_entry()
    archive = _tgz(
        tmp_path / "lying.tgz",
        {"manifest.json": _manifest({"config.yaml": (sha, size - 1)}), "config.yaml": CONFIG},
    )
    with pytest.raises(BundleError, match="corrupted file 'config.yaml'.*says 11 bytes"):
        install_bundle(archive, tmp_path / "models", engine="pocket-tts")


def test_the_declared_total_is_held_to_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unpack, "MAX_BUNDLE_BYTES", 8)
    archive = _zip(
        tmp_path / "b.zip",
        {"manifest.json": _manifest({"config.yaml": _config_entry()}), "config.yaml": CONFIG},
    )
    with pytest.raises(BundleError, match="at most 8") as caught:
        install_bundle(archive, tmp_path / "models", engine="pocket-tts")
    assert caught.value.value == len(CONFIG) + len(_manifest({"config.yaml": _config_entry()}))


@pytest.mark.parametrize("name", ["../evil.bin", "/abs.bin", "bomb/sub/x.bin"])
def test_members_out_of_a_flat_bundle_are_refused(name: str, tmp_path: Path) -> None:
    archive = _tgz(
        tmp_path / "odd.tgz",
        {name: b"x", "manifest.json": _manifest({"config.yaml": _config_entry()})},
    )
    with pytest.raises(BundleError, match="escapes the bundle|unexpected"):
        install_bundle(archive, tmp_path / "models", engine="pocket-tts")


def test_links_in_a_tar_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "link.tar"
    with tarfile.open(path, "w") as archive:
        manifest = _manifest({"config.yaml": _config_entry()})
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        archive.addfile(info, io.BytesIO(manifest))
        link = tarfile.TarInfo("config.yaml")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
    with pytest.raises(BundleError, match="'config.yaml' must be a regular file"):
        install_bundle(path, tmp_path / "models", engine="pocket-tts")


def test_the_copy_counts_the_bytes_it_writes(tmp_path: Path) -> None:
    """The table's size is not trusted during the copy: a stream that runs past
    it is stopped there, one that ends short is refused."""
    target = tmp_path / "long"
    with pytest.raises(BundleError, match="more than the 10 bytes"):
        unpack.copy_counted(io.BytesIO(bytes(5 * MiB)), target, 10, "long")
    assert target.stat().st_size <= 10
    with pytest.raises(BundleError, match="holds 3 bytes, not the 10"):
        unpack.copy_counted(io.BytesIO(b"abc"), tmp_path / "short", 10, "short")


@pytest.mark.parametrize(
    ("document", "why"),
    [
        (b"[" * 200_000 + b"]" * 200_000, "nested deeper"),
        (_manifest({"config.yaml": _config_entry()}, offset=1), "not a finite number"),
        (b'{"format": 1, "files": {"a": {"sha256": NaN}}}', "NaN"),
    ],
)
def test_a_hostile_manifest_is_a_one_line_error(
    document: bytes,
    why: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = document.replace(b'"offset": 1', b'"offset": 1e400')
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "home"))
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "manifest.json").write_bytes(document)
    (folder / "config.yaml").write_bytes(CONFIG)
    archive = _zip(tmp_path / "b.zip", {"manifest.json": document, "config.yaml": CONFIG})
    for source in (folder, archive):
        assert main(["models", "import", "pocket-tts", str(source)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and why in err, err


def test_load_json_limits() -> None:
    assert load_json('{"a": [1, 2.5, "[[[["]}', max_depth=2) == {"a": [1, 2.5, "[[[["]}
    with pytest.raises(JSONLimitError, match="deeper than 2"):
        load_json("[[[1]]]", max_depth=2)
    for text in ("1e400", "-1e400", "Infinity", "[NaN]"):
        with pytest.raises(JSONLimitError):
            load_json(text)


def test_a_models_folder_that_cannot_be_written_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "models").write_text("a file where the models folder should be")
    monkeypatch.setenv("VOXCLONE_HOME", str(home))
    # Models are no longer under the home by default (issue 46): name the folder.
    monkeypatch.setenv("VOXCLONE_MODELS_DIR", str(home / "models"))
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "manifest.json").write_bytes(_manifest({"config.yaml": _config_entry()}))
    (folder / "config.yaml").write_bytes(CONFIG)
    assert main(["models", "import", "pocket-tts", str(folder)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("voxclone: error: cannot install the model:"), err
