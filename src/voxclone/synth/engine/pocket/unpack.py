"""A bundle archive unpacked without trusting it: sizes checked before, bytes counted during.

Zip and gzip squeeze zeros about 1000:1, so a 1.5 MB archive wrote ~1.07 GB
to the temp folder before the import refused it (issue 37). Now nothing is
written until the archive's own table agrees with its manifest:

1. the member list (zip central directory, tar headers; no data written) and
   the ``manifest.json`` in it (size-capped, parsed with limits) are read;
2. every member must be the manifest or a file it lists, flat, regular, and
   declared with the manifest's size; anything else refuses the archive;
3. the declared total must fit :data:`MAX_BUNDLE_BYTES`, the temp folder's
   free space, and :data:`MAX_EXPANSION` times the archive's own size;
4. each member is then copied with its bytes counted, and the copy stops at
   the size it declared (a stream that runs longer is refused, not written).

The hashes are checked afterwards by ``bundle.verify_directory`` as before.
"""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from voxclone.synth.engine.pocket.bundle import (
    INSTALLED,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    BundleError,
    Manifest,
    manifest_from_bytes,
)

# The largest bundle an import unpacks (the full-size Pocket TTS weights are
# a few hundred MB); more is refused before a byte is written.
MAX_BUNDLE_BYTES = 8 << 30
# Weights hardly compress (float noise); an archive that would expand more
# than this much is refused as a decompression bomb once it passes the floor.
MAX_EXPANSION = 50
EXPANSION_FLOOR_BYTES = 64 << 20
# Room left in the temp folder beside the unpacked bundle.
FREE_MARGIN_BYTES = 64 << 20
_CHUNK = 1 << 20


@dataclass(frozen=True)
class _Member:
    path: str  # as the archive names it
    parts: tuple[str, ...]  # normalized: no "." parts
    size: int  # declared
    is_dir: bool
    is_file: bool
    handle: object  # ZipInfo or TarInfo


def _parts(name: str) -> tuple[str, ...]:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts:
        raise BundleError(f"archive member '{name[:80]}' escapes the bundle")
    return tuple(p for p in path.parts if p != ".")


def _zip_members(archive: zipfile.ZipFile) -> list[_Member]:
    return [
        _Member(i.filename, _parts(i.filename), i.file_size, i.is_dir(), not i.is_dir(), i)
        for i in archive.infolist()
    ]


def _tar_members(archive: tarfile.TarFile) -> list[_Member]:
    return [
        _Member(m.name, _parts(m.name), m.size if m.isreg() else 0, m.isdir(), m.isreg(), m)
        for m in archive.getmembers()
    ]


def _root(members: list[_Member]) -> tuple[str, ...]:
    """The folder the manifest is in: the top, or one folder below it."""
    found = [m.parts[:-1] for m in members if m.is_file and m.parts[-1:] == (MANIFEST,)]
    found = [p for p in found if len(p) <= 1]
    if not found:
        raise BundleError("not a model bundle: no manifest.json at its top level")
    if len(set(found)) > 1:
        raise BundleError("the archive holds more than one bundle (several manifest.json)")
    return found[0]


def _plan(members: list[_Member], root: tuple[str, ...], manifest: Manifest) -> list[_Member]:
    """The members to write; BundleError for anything the manifest does not account for."""
    declared = {f.name: f.size for f in manifest.files}
    wanted: list[_Member] = []
    seen: set[str] = set()
    for m in members:
        inside = m.parts[: len(root)] == root
        if not inside and m.parts[:1] and m.parts[0].startswith("."):
            continue  # top-level dot entries (e.g. "._bundle") were never part of one
        if m.is_dir and root[: len(m.parts)] == m.parts:
            continue  # the bundle's own folder (or "."): nothing to write
        rest = m.parts[len(root) :] if inside else m.parts
        label = "/".join(m.parts)[:80]
        if not inside or len(rest) != 1:
            raise BundleError(
                f"unexpected '{label}' in the archive: a bundle is one flat folder of the "
                "files its manifest lists"
            )
        name = rest[0]
        if not m.is_file:
            raise BundleError(f"'{label}' must be a regular file")
        if name in seen:
            raise BundleError(f"'{label}' is in the archive twice")
        seen.add(name)
        if name == INSTALLED:
            raise BundleError(
                f"'{INSTALLED}' is written by the import; the archive may not hold it"
            )
        if name != MANIFEST:
            if name not in declared:
                raise BundleError(
                    f"unknown file '{name}' in the bundle: its manifest does not list it "
                    "(remove it, or rebuild the manifest if it belongs to the model)"
                )
            if m.size != declared[name]:
                raise BundleError(
                    f"corrupted file '{name}': the archive says {m.size} bytes, "
                    f"the manifest {declared[name]}"
                )
        wanted.append(m)
    return wanted


def _check_budget(total: int, source: Path, out: Path) -> None:
    if total > MAX_BUNDLE_BYTES:
        raise BundleError(
            f"the bundle declares {total} bytes; an import unpacks at most "
            f"{MAX_BUNDLE_BYTES} ({MAX_BUNDLE_BYTES >> 30} GiB)",
            limit=MAX_BUNDLE_BYTES,
            value=total,
        )
    packed = max(1, source.stat().st_size)
    if total > max(EXPANSION_FLOOR_BYTES, MAX_EXPANSION * packed):
        raise BundleError(
            f"'{source.name}' ({packed} bytes) would unpack to {total} bytes, more than "
            f"{MAX_EXPANSION} times its size: refused as a decompression bomb (unpack it "
            "yourself and import the folder if it is genuine)",
            limit=MAX_EXPANSION,
            value=total,
        )
    free = shutil.disk_usage(out).free
    if total + FREE_MARGIN_BYTES > free:
        raise BundleError(
            f"the bundle needs {total} bytes in the temp folder ({out.parent}), "
            f"which has {free} free; set TMPDIR to a roomier folder",
            value=total,
        )


def copy_counted(stream: IO[bytes], target: Path, size: int, label: str) -> None:
    """Copy ``stream`` to a new file ``target``, refusing it as soon as it runs
    past ``size`` bytes (or ends short of it): the bytes written are counted,
    whatever the archive's table said."""
    written = 0
    with open(target, "xb") as out:
        while chunk := stream.read(min(_CHUNK, size - written + 1)):
            written += len(chunk)
            if written > size:
                raise BundleError(f"'{label}' holds more than the {size} bytes it declares")
            out.write(chunk)
    if written != size:
        raise BundleError(f"'{label}' holds {written} bytes, not the {size} it declares")


def _read_manifest(opener: Callable[[_Member], IO[bytes]], member: _Member) -> Manifest:
    if member.size > MAX_MANIFEST_BYTES:
        raise BundleError(
            f"manifest.json is {member.size} bytes; at most {MAX_MANIFEST_BYTES}",
            limit=MAX_MANIFEST_BYTES,
        )
    with opener(member) as stream:
        data = stream.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise BundleError(f"manifest.json is over {MAX_MANIFEST_BYTES} bytes")
    return manifest_from_bytes(data)


def _opened(source: Path) -> AbstractContextManager[zipfile.ZipFile | tarfile.TarFile]:
    if source.name.lower().endswith(".zip"):
        return zipfile.ZipFile(source)
    return tarfile.open(source)


def _members(archive: zipfile.ZipFile | tarfile.TarFile) -> list[_Member]:
    if isinstance(archive, zipfile.ZipFile):
        return _zip_members(archive)
    return _tar_members(archive)


def _opener(archive: zipfile.ZipFile | tarfile.TarFile) -> Callable[[_Member], IO[bytes]]:
    def open_member(member: _Member) -> IO[bytes]:
        if isinstance(archive, zipfile.ZipFile):
            assert isinstance(member.handle, zipfile.ZipInfo)
            return archive.open(member.handle)
        assert isinstance(member.handle, tarfile.TarInfo)
        stream = archive.extractfile(member.handle)
        if stream is None:
            raise BundleError(f"'{member.path[:80]}' must be a regular file")
        return stream

    return open_member


def unpack_archive(source: Path, out: Path) -> None:
    """Unpack the bundle archive ``source`` (.zip, .tar, .tar.gz, .tgz) into
    the empty folder ``out``, within the budget; BundleError otherwise."""
    try:
        with _opened(source) as archive:
            members = _members(archive)
            root = _root(members)
            open_member = _opener(archive)
            manifest_member = next(m for m in members if m.is_file and m.parts == (*root, MANIFEST))
            manifest = _read_manifest(open_member, manifest_member)
            wanted = _plan(members, root, manifest)
            _check_budget(sum(m.size for m in wanted), source, out)
            folder = out.joinpath(*root)
            folder.mkdir(parents=True, exist_ok=True)
            for m in wanted:
                with open_member(m) as stream:
                    copy_counted(stream, folder / m.parts[-1], m.size, m.parts[-1])
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise BundleError(
            f"cannot unpack '{source.name}' ({exc.__class__.__name__}): "
            "the archive is damaged or not an archive"
        ) from None
    except OSError as exc:
        raise BundleError(
            f"cannot unpack '{source.name}': {exc.strerror or exc.__class__.__name__}"
        ) from None
