"""Operator-supplied model bundles: verify, install, list.

A bundle is a directory (or a .tar/.tar.gz/.tgz/.zip archive of one) holding
``manifest.json`` and the files it lists, each with its SHA-256 and size::

    {"format": 1, "engine": "pocket-tts", "name": "english", "version": "…",
     "license": {"code": "MIT", "weights": "CC-BY-4.0"}, "languages": ["en"],
     "files": {"config.yaml": {"sha256": "…", "bytes": 1234}, …}}

Import is all-or-nothing: a file whose hash or size differs from the manifest
(corrupted) or a file the manifest does not list (unknown) rejects the whole
bundle before anything is written under ``VOXCLONE_HOME/models``. The copy is
hashed again after it is written, then renamed into place, so a reader sees the
old bundle or the new one, never half of one.

Nothing here touches the network: weights enter only through this import.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voxclone.errors import InvalidInput
from voxclone.synth.files import sha256_file
from voxclone.synth.json_limits import JSONLimitError, load_json

MANIFEST = "manifest.json"
# A manifest lists a handful of files; anything this big is not one.
MAX_MANIFEST_BYTES = 1 << 20
INSTALLED = "installed.json"  # written by import: when, and that every file was verified
FORMAT = 1
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".zip")


class BundleError(InvalidInput):
    """A model bundle is malformed, corrupted or holds files it does not declare."""

    code = "invalid_model_bundle"


@dataclass(frozen=True)
class BundleFile:
    name: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Manifest:
    engine: str
    name: str
    version: str
    license: dict[str, str]
    languages: tuple[str, ...]
    files: tuple[BundleFile, ...]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def file(self, name: str) -> BundleFile:
        for f in self.files:
            if f.name == name:
                return f
        raise BundleError(f"the bundle's manifest lists no file '{name}'")

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "engine": self.engine,
            "name": self.name,
            "version": self.version,
            "license": dict(self.license),
            "languages": list(self.languages),
            "files": {f.name: {"sha256": f.sha256, "bytes": f.size} for f in self.files},
            **self.extra,
        }


@dataclass(frozen=True)
class InstalledBundle:
    path: Path
    manifest: Manifest
    imported_at: float | None


def _safe_name(name: str, what: str) -> str:
    # Flat bundles only: a name can never climb out of the bundle directory.
    if not isinstance(name, str) or not _NAME_RE.match(name) or name in (".", ".."):
        raise BundleError(
            f"invalid {what} {name!r}: use letters, digits, '.', '_' or '-' "
            "(no folders), at most 64 characters"
        )
    return name


def parse_manifest(data: Any) -> Manifest:
    if not isinstance(data, dict):
        raise BundleError("manifest.json must hold a JSON object")
    if data.get("format") != FORMAT:
        raise BundleError(f"unsupported bundle format {data.get('format')!r} (supported: {FORMAT})")
    files_raw = data.get("files")
    if not isinstance(files_raw, dict) or not files_raw:
        raise BundleError("manifest.json lists no files")
    files = []
    for name, meta in sorted(files_raw.items()):
        _safe_name(name, "file name")
        if name in (MANIFEST, INSTALLED):
            raise BundleError(f"manifest.json may not list '{name}'")
        sha = meta.get("sha256") if isinstance(meta, dict) else None
        size = meta.get("bytes") if isinstance(meta, dict) else None
        if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise BundleError(f"manifest.json: '{name}' needs a 64-hex-digit sha256")
        if not isinstance(size, int) or size < 0:
            raise BundleError(f"manifest.json: '{name}' needs its size in bytes")
        files.append(BundleFile(name, sha, size))
    licence = data.get("license") or {}
    if not isinstance(licence, dict):
        raise BundleError("manifest.json: 'license' must map parts (code, weights) to licenses")
    languages = data.get("languages") or []
    if not isinstance(languages, list) or not all(isinstance(x, str) for x in languages):
        raise BundleError("manifest.json: 'languages' must be a list of language codes")
    known = {"format", "engine", "name", "version", "license", "languages", "files"}
    return Manifest(
        engine=str(data.get("engine", "")),
        name=_safe_name(str(data.get("name", "")), "bundle name"),
        version=str(data.get("version", "")),
        license={str(k): str(v) for k, v in licence.items()},
        languages=tuple(languages),
        files=tuple(files),
        extra={k: v for k, v in data.items() if k not in known},
    )


def manifest_from_bytes(data: bytes) -> Manifest:
    """Parse manifest.json's bytes: nesting and numbers bounded (synth/json_limits.py),
    so a hostile manifest is a BundleError, never a RecursionError or an infinity."""
    try:
        parsed = load_json(data)
    except JSONLimitError as exc:
        raise BundleError(f"manifest.json is refused: {exc}") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits
        raise BundleError(f"manifest.json is not valid JSON ({exc.__class__.__name__})") from None
    return parse_manifest(parsed)


def read_manifest(directory: Path) -> Manifest:
    path = directory / MANIFEST
    if not path.is_file():
        raise BundleError("not a model bundle: it has no manifest.json")
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise BundleError(
                f"manifest.json is over {MAX_MANIFEST_BYTES} bytes", limit=MAX_MANIFEST_BYTES
            )
        data = path.read_bytes()
    except OSError as exc:
        raise BundleError(f"manifest.json cannot be read ({exc.__class__.__name__})") from None
    return manifest_from_bytes(data)


def verify_directory(directory: Path, *, engine: str | None = None) -> Manifest:
    """Check a bundle directory against its manifest; return the manifest.

    Every listed file must be present with the listed size and SHA-256, and
    nothing else may be there (besides our own ``installed.json``).
    """
    manifest = read_manifest(directory)
    if engine is not None and manifest.engine != engine:
        raise BundleError(
            f"this bundle is for engine '{manifest.engine}', not '{engine}'", field="engine"
        )
    listed = {f.name for f in manifest.files}
    for entry in sorted(directory.iterdir()):
        if entry.name in (MANIFEST, INSTALLED):
            continue
        if entry.name not in listed:
            raise BundleError(
                f"unknown file '{entry.name}' in the bundle: its manifest does not list it "
                "(remove it, or rebuild the manifest if it belongs to the model)"
            )
        if entry.is_symlink() or not entry.is_file():
            raise BundleError(f"'{entry.name}' must be a regular file")
    for f in manifest.files:
        path = directory / f.name
        if not path.is_file():
            raise BundleError(f"missing file '{f.name}' listed in the bundle's manifest")
        size = path.stat().st_size
        if size != f.size:
            raise BundleError(
                f"corrupted file '{f.name}': {size} bytes, the manifest says {f.size}"
            )
        digest = sha256_file(path)
        if digest != f.sha256:
            raise BundleError(
                f"corrupted file '{f.name}': SHA-256 {digest[:12]}…, "
                f"the manifest says {f.sha256[:12]}…"
            )
    return manifest


def write_manifest(
    directory: Path,
    *,
    engine: str,
    name: str,
    version: str,
    license: dict[str, str],
    languages: list[str],
    extra: dict[str, Any] | None = None,
) -> Manifest:
    """Hash every file in ``directory`` and write its manifest (for bundle makers)."""
    files = []
    for entry in sorted(directory.iterdir()):
        if entry.name in (MANIFEST, INSTALLED) or not entry.is_file():
            continue
        files.append(BundleFile(entry.name, sha256_file(entry), entry.stat().st_size))
    manifest = Manifest(
        engine=engine,
        name=_safe_name(name, "bundle name"),
        version=version,
        license=dict(license),
        languages=tuple(languages),
        files=tuple(files),
        extra=dict(extra or {}),
    )
    (directory / MANIFEST).write_text(json.dumps(manifest.to_json(), indent=2) + "\n")
    return manifest


@contextmanager
def opened_bundle(source: Path) -> Iterator[Path]:
    """Yield the bundle directory of ``source``: itself, or an archive unpacked to a temp dir."""
    if source.is_dir():
        yield _bundle_root(source)
        return
    if not source.is_file():
        raise BundleError(f"no such bundle: {source.name}")
    lowered = source.name.lower()
    if not lowered.endswith(_ARCHIVE_SUFFIXES):
        raise BundleError(
            f"cannot read '{source.name}': give a bundle directory or a "
            f"{', '.join(_ARCHIVE_SUFFIXES)} archive of one"
        )
    # Here, not at the top: unpack.py builds on this module's manifest parsing.
    from voxclone.synth.engine.pocket.unpack import unpack_archive

    with tempfile.TemporaryDirectory(prefix="voxclone-bundle-") as tmp:
        out = Path(tmp)
        # Sizes checked against the manifest before a byte is written, bytes
        # counted while writing (a 1.5 MB archive once unpacked to ~1 GB).
        unpack_archive(source, out)
        yield _bundle_root(out)


def _bundle_root(directory: Path) -> Path:
    if (directory / MANIFEST).exists():
        return directory
    children = [p for p in directory.iterdir() if not p.name.startswith(".")]
    if len(children) == 1 and children[0].is_dir() and (children[0] / MANIFEST).exists():
        return children[0]
    raise BundleError("not a model bundle: no manifest.json at its top level")


def install_bundle(
    source: Path,
    models_dir: Path,
    *,
    engine: str,
    check: Callable[[Path, Manifest], None] | None = None,
) -> InstalledBundle:
    """Verify ``source`` and copy it to ``models_dir/<engine>/<name>``, replacing an older copy.

    ``check`` is the engine's own structural check of the verified files
    (config parses, weights header is whole, tokenizer matches the config).
    """
    with opened_bundle(source) as root:
        manifest = verify_directory(root, engine=engine)
        if check is not None:
            check(root, manifest)
        engine_dir = models_dir / _safe_name(engine, "engine name")
        engine_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{manifest.name}.", dir=engine_dir))
        try:
            for f in manifest.files:
                shutil.copyfile(root / f.name, staging / f.name)
            shutil.copyfile(root / MANIFEST, staging / MANIFEST)
            # Hash the copy, not just the source: a full disk or a flaky mount
            # must not leave a model that only looks installed.
            verify_directory(staging, engine=engine)
            imported_at = time.time()
            (staging / INSTALLED).write_text(
                json.dumps({"imported_at": imported_at, "verified": "sha256"}) + "\n"
            )
            target = engine_dir / manifest.name
            old = None
            if target.exists():
                old = engine_dir / f".{manifest.name}.old-{os.getpid()}"
                os.replace(target, old)
            os.replace(staging, target)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return InstalledBundle(target, manifest, imported_at)


def installed_bundles(models_dir: Path, engine: str) -> list[InstalledBundle]:
    """Bundles installed for ``engine`` (manifests only; no hashing)."""
    engine_dir = models_dir / engine
    if not engine_dir.is_dir():
        return []
    found = []
    for entry in sorted(engine_dir.iterdir()):
        if entry.name.startswith(".") or not (entry / MANIFEST).is_file():
            continue
        try:
            manifest = read_manifest(entry)
        except BundleError:
            continue
        imported_at = None
        with suppress(OSError, ValueError, KeyError, TypeError):
            imported_at = float(load_json((entry / INSTALLED).read_bytes())["imported_at"])
        found.append(InstalledBundle(entry, manifest, imported_at))
    return found


def installed_bundle(models_dir: Path, engine: str, name: str | None = None) -> InstalledBundle:
    """The installed bundle called ``name`` (or the only / first one) for ``engine``."""
    bundles = installed_bundles(models_dir, engine)
    if name is not None:
        bundles = [b for b in bundles if b.manifest.name == name]
    if not bundles:
        wanted = f"'{name}' " if name else ""
        raise BundleError(
            f"no {engine} model {wanted}is installed: import one with "
            f"`voxclone models import {engine} DIR|ARCHIVE`"
        )
    return bundles[0]


def check_sizes(bundle: InstalledBundle) -> None:
    """Cheap start-up check (sizes only; import already hashed every file)."""
    for f in bundle.manifest.files:
        path = bundle.path / f.name
        if not path.is_file() or path.stat().st_size != f.size:
            raise BundleError(
                f"installed model '{bundle.manifest.name}' is damaged ('{f.name}'); import it again"
            )
