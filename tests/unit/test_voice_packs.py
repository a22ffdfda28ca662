"""The model's other voice packs (npm kokoro-js): verified install, safe extraction,
and an atlas that keeps working without them."""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from voxclone.errors import ModelAssetError
from voxclone.synth.engine.kokoro.voice_packs import (
    PACK_BYTES,
    install_voice_packs,
    load_voice_packs,
    packs_dir,
)
from voxclone.synth.voice.atlas import VoiceAtlas, usable_rows
from voxclone.synth.voice.style_space import build_basis


def _tarball(path: Path, members: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    path.write_bytes(buffer.getvalue())
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def _pack_bytes(value: float) -> bytes:
    return np.full(PACK_BYTES // 4, value, "<f4").tobytes()


# The test tarballs' packs, pinned as the real ones are in voice_pack_hashes.
PINNED = {
    name: hashlib.sha256(_pack_bytes(value)).hexdigest()
    for name, value in {"am_adam": 0.5, "bf_emma": -1.0, "bm_george": 0.25}.items()
}


def test_installs_only_well_formed_packs(tmp_path: Path) -> None:
    tgz = tmp_path / "kokoro-js.tgz"
    sha = _tarball(
        tgz,
        {
            "package/voices/am_adam.bin": _pack_bytes(0.5),
            "package/voices/bf_emma.bin": _pack_bytes(-1.0),
            "package/voices/short.bin": b"\x00" * 10,  # wrong size, bad name
            "package/voices/af_cut.bin": _pack_bytes(1.0)[:-4],  # wrong size
            "package/voices/../../evil.bin": _pack_bytes(2.0),  # path escape
            "package/dist/kokoro.js": b"code",
        },
    )
    models = tmp_path / "models"
    assert install_voice_packs(models, tarball=tgz, expected_sha256=sha) == 2
    assert sorted(p.name for p in packs_dir(models).iterdir()) == ["am_adam.bin", "bf_emma.bin"]
    assert not list(tmp_path.rglob("evil.bin"))
    packs = load_voice_packs(models, pinned=PINNED)
    assert sorted(packs) == ["am_adam", "bf_emma"]
    assert packs["am_adam"].shape == (510, 1, 256) and float(packs["bf_emma"][3, 0, 7]) == -1.0


def test_a_tarball_with_another_hash_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    tgz = tmp_path / "kokoro-js.tgz"
    _tarball(tgz, {"package/voices/am_adam.bin": _pack_bytes(0.5)})
    with pytest.raises(ModelAssetError, match="SHA-256"):
        install_voice_packs(tmp_path / "models", tarball=tgz)  # the pinned hash
    assert load_voice_packs(tmp_path / "models", pinned=PINNED) == {}


def test_reinstall_replaces_the_set_and_skips_damaged_files(tmp_path: Path) -> None:
    tgz = tmp_path / "a.tgz"
    models = tmp_path / "models"
    sha = _tarball(tgz, {"package/voices/am_adam.bin": _pack_bytes(0.5)})
    install_voice_packs(models, tarball=tgz, expected_sha256=sha)
    sha = _tarball(tgz, {"package/voices/bm_george.bin": _pack_bytes(0.25)})
    install_voice_packs(models, tarball=tgz, expected_sha256=sha)
    assert sorted(load_voice_packs(models, pinned=PINNED)) == ["bm_george"]
    (packs_dir(models) / "bm_george.bin").write_bytes(b"truncated")
    assert load_voice_packs(models, pinned=PINNED) == {}


def test_a_pack_changed_after_the_install_is_refused_and_packs_are_private(
    tmp_path: Path,
) -> None:
    """Issue 45: packs were trusted by name and size, so a file of the right
    size changed on disk (the models folder is shared by every home) was
    loaded; and they were written with the umask's mode (0644)."""
    tgz = tmp_path / "a.tgz"
    models = tmp_path / "models"
    members = {"package/voices/am_adam.bin": _pack_bytes(0.5)}
    members["package/voices/bf_emma.bin"] = _pack_bytes(-1.0)
    install_voice_packs(models, tarball=tgz, expected_sha256=_tarball(tgz, members))
    for path in packs_dir(models).iterdir():
        assert path.stat().st_mode & 0o777 == 0o600, path
    (packs_dir(models) / "am_adam.bin").write_bytes(_pack_bytes(0.75))  # same size
    assert sorted(load_voice_packs(models, pinned=PINNED)) == ["bf_emma"]
    # A pack that is not among the pinned ones is not trusted either.
    assert load_voice_packs(models, pinned={}) == {}


def test_the_pinned_table_covers_the_54_packs_of_the_pinned_tarball() -> None:
    from voxclone.synth.engine.kokoro.voice_pack_hashes import PACK_SHA256

    assert len(PACK_SHA256) == 54 and "af_heart" in PACK_SHA256 and "zm_yunjian" in PACK_SHA256
    assert all(len(digest) == 64 for digest in PACK_SHA256.values())


def _packs(names: list[str], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal((510, 1, 256)).astype(np.float32) for n in names}


def _atlas_arrays(packs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Voices 0-1: built-ins on the first two packs; 2: on both; 3-4: need the extra pack."""
    basis = build_basis(packs, n_random=2)
    names = list(basis.pack_names)
    extra = names.index("am_extra")
    timbre = np.zeros((5, len(names)), np.float32)
    timbre[0, names.index("jf_one")] = timbre[1, names.index("jm_two")] = 1.0
    timbre[2, [names.index("jf_one"), names.index("jm_two")]] = 0.5
    timbre[3, extra] = 1.0
    timbre[4, [extra, names.index("jm_two")]] = 0.5
    prosody = timbre.copy()
    prosody[4] = 0.0
    prosody[4, names.index("jm_two")] = 1.0  # timbre alone may need the missing pack
    return {
        "format_version": np.array(1),
        "pack_names": np.array(names),
        "directions": basis.directions,
        "timbre_weights": timbre,
        "timbre_coeffs": np.zeros((5, basis.n_directions), np.float32),
        "prosody_weights": prosody,
        "embeddings": np.eye(5, 256, dtype=np.float16),
        "f0_median": np.array([200, 100, 150, 110, 120], np.float32),
        "wer": np.zeros(5, np.float32),
        "labels": np.array(["one", "two", "", "", ""]),
    }


def test_atlas_without_the_extra_packs_keeps_the_voices_it_can_make(tmp_path: Path) -> None:
    every = _packs(["jf_one", "jm_two", "am_extra"])
    arrays = _atlas_arrays(every)
    path = tmp_path / "atlas.npz"
    np.savez(path, **arrays)  # type: ignore[arg-type]

    full = VoiceAtlas.load(every, path)
    assert len(full) == 5 and full.basis.n_packs == 3

    shipped_only = {n: p for n, p in every.items() if n != "am_extra"}
    partial = VoiceAtlas.load(shipped_only, path)
    assert len(partial) == 3
    assert partial.basis.pack_names == ("jf_one", "jm_two")
    assert list(partial.labels) == ["one", "two", ""]
    # The remaining voices are the same voices: identical packs either way.
    for i in range(3):
        assert np.array_equal(
            partial.basis.pack(partial.recipe(i)), full.basis.pack(full.recipe(i))
        )
    assert np.array_equal(partial.f0_median, full.f0_median[:3])


def test_atlas_refuses_when_a_built_in_voice_cannot_be_made() -> None:
    every = _packs(["jf_one", "jm_two", "am_extra"])
    arrays = _atlas_arrays(every)
    assert usable_rows(arrays, every) is arrays
    with pytest.raises(ModelAssetError, match="not installed"):
        usable_rows(arrays, {n: p for n, p in every.items() if n != "jm_two"})


def test_the_extension_keeps_the_base_packs_first_and_blends_within_one_sex(
    repo_script: Callable[[str], ModuleType],
) -> None:
    script = repo_script("build_atlas")
    base = ("jf_alpha", "jm_kumo")
    extra = ("bm_george", "af_heart", "am_adam", "jm_kumo", "bf_emma")
    names, recipes = script.extension_recipes(base, extra, 40, 16)
    assert names == ("jf_alpha", "jm_kumo", "af_heart", "am_adam", "bf_emma", "bm_george")
    # Each new pack once, as it is; then the random voices.
    for i, name in enumerate(names[2:]):
        assert recipes[i].timbre_weights[names.index(name)] == 1.0
    male = {i for i, n in enumerate(names) if n[1] == "m"}
    for k, recipe in enumerate(recipes[4:]):
        used = set(np.flatnonzero(recipe.timbre_weights)) | set(
            np.flatnonzero(recipe.prosody_weights)
        )
        assert used <= male if k % 2 == 0 else not (used & male)
        assert recipe.timbre_weights.sum() == pytest.approx(1.0)
    again = script.extension_recipes(base, extra, 40, 16)[1]
    pairs = zip(recipes, again, strict=True)
    assert all(np.array_equal(a.timbre_coeffs, b.timbre_coeffs) for a, b in pairs)
