"""Build the voice atlas that instant cloning searches.

Each atlas voice is a random recipe in the style space (see
``voxclone.synth.voice.style_space``), synthesized on a few short sentences
with Kokoro; we record its resemblyzer embedding, median F0 and Whisper
tiny.en WER. The output stores only recipes, the basis directions and those
measurements (not the 510×256 packs), so it stays small; packs are rebuilt
from the shipped Kokoro packs at load time.

Deterministic: recipes come from ``--seed``; synthesis, embedding and ASR run
single-threaded so the same command writes the same numbers. Work is spread
over ``--workers`` processes and results are put back in index order.

    python scripts/build_atlas.py --voices 300 --workers 2
    python scripts/build_atlas.py --voices 2 --no-asr --out /tmp/tiny.npz   # smoke test
    python scripts/build_atlas.py --voices 1500 --workers 2 --resume atlas.npz  # grow one
    python scripts/build_atlas.py --extend base.npz --extra-voices 250 --workers 2  # + extra packs

The first voices are the five shipped packs and the built-in blends (with
their own prosody, and named in the ``labels`` column), so the atlas always
contains every voice the product already has. Of the random voices, a fixed
``MALE_SHARE`` lean on the only male pack (timbre weight >= 0.4, prosody
weight >= 0.5, hence low F0); without that the atlas is mostly female.

Recipes are a prefix-stable sequence: the first N voices of a longer build
are exactly a ``--voices N`` build, so a checkpoint of an interrupted build
is itself a reproducible atlas. Embeddings are stored as float16 (ranking by
cosine does not need more) to keep the shipped file small.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from voxclone.config import Settings  # noqa: E402
from voxclone.synth.voice.style_space import (  # noqa: E402
    StyleBasis,
    VoiceRecipe,
    basis_from_arrays,
    build_basis,
    sample_recipe,
    sample_same_sex_recipe,
)

DEFAULT_OUT = ROOT / "src" / "voxclone" / "synth" / "voice" / "data" / "atlas.npz"
DEFAULT_MODELS = Settings().models_dir  # the product's (models_location.py)
SENTENCES = (
    "The birch canoe slid on the smooth planks.",
    "Four hours of steady work faced us.",
)
FORMAT_VERSION = 1
# The only male Kokoro pack; random voices anchored on it balance the atlas by sex.
MALE_PACK = "jm_kumo"
MALE_SHARE = 0.45


def packs_digest(packs: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(packs):
        h.update(name.encode())
        h.update(np.ascontiguousarray(packs[name], dtype=np.float32).tobytes())
    return h.hexdigest()[:16]


def make_recipes(
    basis: StyleBasis, n_voices: int, seed: int, male_share: float = MALE_SHARE
) -> list[VoiceRecipe]:
    """Fixed voices first (shipped packs, built-in blends), then random ones."""
    from voxclone.synth.engine.kokoro.builtin_voices import BLENDS

    fixed = [basis.recipe_for_pack(name) for name in basis.pack_names]
    for blend in BLENDS:
        w = np.array([blend.recipe.get(n, 0.0) for n in basis.pack_names], np.float32)
        w /= w.sum()
        fixed.append(VoiceRecipe(w, np.zeros(basis.n_directions, np.float32), w.copy()))
    rng = np.random.default_rng(seed)
    male = basis.pack_names.index(MALE_PACK) if MALE_PACK in basis.pack_names else None
    randoms = []
    for i in range(max(0, n_voices - len(fixed))):
        # A fixed interleave (not a coin flip) keeps the male share exact at any size.
        anchored = male is not None and (i % 20) < round(20 * male_share)
        randoms.append(
            sample_recipe(rng, basis.n_packs, basis.n_directions, anchor=male if anchored else None)
        )
    return (fixed + randoms)[:n_voices]


def fixed_labels(basis: StyleBasis, n_voices: int) -> np.ndarray:
    """Names of the built-in voices at the head of the atlas, "" for random voices."""
    from voxclone.synth.engine.kokoro.builtin_voices import BLENDS

    names = list(basis.pack_names) + [b.name for b in BLENDS]
    return np.array((names + [""] * n_voices)[:n_voices])


# -- worker side -------------------------------------------------------------
_W: dict[str, Any] = {}


def _init_worker(models_dir: str, use_asr: bool, sentences: tuple[str, ...]) -> None:
    import torch

    torch.set_num_threads(1)
    from voxclone.synth.engine import registry
    from voxclone.synth.engine.base import EngineConfig
    from voxclone.synth.voice.asr import Transcriber
    from voxclone.synth.voice.speaker_encoder import SpeakerEncoder

    engine = registry.create("kokoro", EngineConfig(Path(models_dir)))
    engine.load()
    g2p = engine.tokenizer()
    _W["engine"] = engine
    _W["tokens"] = [g2p.token_ids(g2p.phonemize(s, "en-us")) for s in sentences]
    _W["sentences"] = sentences
    _W["encoder"] = SpeakerEncoder()
    _W["asr"] = Transcriber() if use_asr else None
    _W["basis"] = build_basis(engine.style_packs())


def _measure(job: tuple[int, np.ndarray]) -> tuple[int, np.ndarray, float, float]:
    import soxr

    from voxclone.synth.engine.base import SynthItem
    from voxclone.synth.voice.asr import word_error_rate
    from voxclone.synth.voice.prosody import pitch_stats

    index, pack = job
    engine = _W["engine"]
    clips = engine.synthesize([SynthItem(t, pack, 1.0) for t in _W["tokens"]])
    clips16 = [soxr.resample(c, 24_000, 16_000).astype(np.float32) for c in clips]
    embedding = _W["encoder"].embed_many(clips16)
    f0 = pitch_stats(np.concatenate(clips), 24_000).median_hz
    wer = float("nan")
    if _W["asr"] is not None:
        wers = [
            word_error_rate(text, _W["asr"].transcribe(c, 16_000))
            for text, c in zip(_W["sentences"], clips16, strict=True)
        ]
        wer = float(np.mean(wers))
    return index, embedding.astype(np.float32), float(f0), wer


# -- extension onto the model's other packs -------------------------------------
EXTEND_SEED = 123


def extension_recipes(
    base_names: tuple[str, ...], extra_names: tuple[str, ...], n_random: int, n_directions: int
) -> tuple[tuple[str, ...], list[VoiceRecipe]]:
    """Pack order of the extended atlas and its new voices: each extra pack as
    it is, then ``n_random`` seeded same-sex blends (male and female in turn;
    the pack's sex is the second letter of its name, as Kokoro names them)."""
    names = base_names + tuple(sorted(n for n in extra_names if n not in base_names))
    onehots = []
    for name in names[len(base_names) :]:
        w = np.zeros(len(names), np.float32)
        w[names.index(name)] = 1.0
        onehots.append(VoiceRecipe(w, np.zeros(n_directions, np.float32), w.copy()))
    male = np.array([i for i, n in enumerate(names) if n[1:2] == "m"])
    female = np.array([i for i, n in enumerate(names) if n[1:2] == "f"])
    rng = np.random.default_rng(EXTEND_SEED)
    randoms = [
        sample_same_sex_recipe(rng, male if i % 2 == 0 else female, len(names), n_directions)
        for i in range(n_random)
    ]
    return names, onehots + randoms


def extend(
    base_path: Path,
    n_random: int,
    *,
    workers: int = 1,
    models_dir: Path = DEFAULT_MODELS,
) -> dict[str, np.ndarray]:
    """``base_path``'s voices unchanged (their blend weights padded with zeros)
    plus voices on the model's other packs (engine/kokoro/voice_packs.py, which
    must be installed), measured like every atlas voice. Deterministic."""
    from voxclone.synth.engine.kokoro.assets import load_packs
    from voxclone.synth.engine.kokoro.voice_packs import load_voice_packs

    base = dict(np.load(base_path, allow_pickle=False))
    base_names = tuple(str(n) for n in base["pack_names"])
    packs = {**load_voice_packs(models_dir), **load_packs()}
    extra = tuple(n for n in packs if n not in base_names)
    if not extra:
        raise SystemExit("no extra voice packs installed: run scripts/fetch_voice_packs.py")
    names, recipes = extension_recipes(
        base_names, extra, n_random, int(base["directions"].shape[0])
    )
    basis = basis_from_arrays(names, packs, base["directions"])
    jobs = [(i, basis.pack(r)) for i, r in enumerate(recipes)]
    results: list[tuple[int, np.ndarray, float, float]] = []
    init_args = (str(models_dir), True, tuple(str(t) for t in base["sentences"]))
    started = time.perf_counter()
    for count, result in enumerate(_measured(jobs, workers, init_args), start=1):
        results.append(result)
        if count % 20 == 0 or count == len(jobs):
            rate = (time.perf_counter() - started) / count
            print(f"{count}/{len(jobs)} new voices, {rate:.2f} s/voice", flush=True)
    results.sort(key=lambda r: r[0])

    def padded(column: str) -> np.ndarray:
        old = base[column]
        out = np.zeros((old.shape[0], len(names)), np.float32)
        out[:, : old.shape[1]] = old
        return np.concatenate([out, np.stack([getattr(r, column) for r in recipes])])

    out = dict(base)
    out.update(
        packs_digest=np.array(packs_digest(packs)),
        pack_names=np.array(names),
        timbre_weights=padded("timbre_weights"),
        prosody_weights=padded("prosody_weights"),
        timbre_coeffs=np.concatenate(
            [base["timbre_coeffs"], np.stack([r.timbre_coeffs for r in recipes])]
        ),
        labels=np.concatenate([base["labels"], np.full(len(recipes), "")]).astype(
            base["labels"].dtype
        ),
        embeddings=np.concatenate(
            [base["embeddings"], np.stack([r[1] for r in results]).astype(np.float16)]
        ),
        f0_median=np.concatenate(
            [base["f0_median"], np.array([r[2] for r in results], np.float32)]
        ),
        wer=np.concatenate([base["wer"], np.array([r[3] for r in results], np.float32)]),
    )
    return out


# -- driver -------------------------------------------------------------------
def build(
    n_voices: int,
    *,
    seed: int = 0,
    workers: int = 1,
    use_asr: bool = True,
    models_dir: Path = DEFAULT_MODELS,
    sentences: tuple[str, ...] = SENTENCES,
    checkpoint: Path | None = None,
    log_every: int = 10,
    resume: Path | None = None,
) -> dict[str, np.ndarray]:
    from voxclone.synth.engine.kokoro.assets import load_packs

    packs = load_packs()
    basis = build_basis(packs, seed=seed)
    recipes = make_recipes(basis, n_voices, seed)
    n = len(recipes)
    embeddings = np.zeros((n, 256), np.float32)
    f0 = np.zeros(n, np.float32)
    wer = np.full(n, np.nan, np.float32)
    done = np.zeros(n, bool)
    if resume is not None:
        # Recipes are prefix-stable, so a smaller build of the same seed and packs
        # is exactly this build's first rows: keep its measurements.
        kept = resumable_rows(resume, basis, recipes, seed, packs_digest(packs), use_asr, sentences)
        k = len(kept["f0_median"])
        embeddings[:k] = kept["embeddings"].astype(np.float32)
        f0[:k], wer[:k], done[:k] = kept["f0_median"], kept["wer"], True
        print(f"resuming: {k} voices kept from {resume}", flush=True)
    jobs = [(i, basis.pack(r)) for i, r in enumerate(recipes) if not done[i]]
    already = int(done.sum())
    started = time.perf_counter()

    def arrays() -> dict[str, np.ndarray]:
        return {
            "format_version": np.array(FORMAT_VERSION),
            "seed": np.array(seed),
            "packs_digest": np.array(packs_digest(packs)),
            "pack_names": np.array(basis.pack_names),
            "directions": basis.directions,
            "sentences": np.array(sentences),
            "timbre_weights": np.stack([r.timbre_weights for r in recipes])[done],
            "timbre_coeffs": np.stack([r.timbre_coeffs for r in recipes])[done],
            "prosody_weights": np.stack([r.prosody_weights for r in recipes])[done],
            "labels": fixed_labels(basis, n)[done],
            "embeddings": embeddings[done].astype(np.float16),  # plenty for cosine ranking
            "f0_median": f0[done],
            "wer": wer[done],
        }

    def record(count: int, result: tuple[int, np.ndarray, float, float]) -> None:
        i, emb, pitch, err = result
        embeddings[i], f0[i], wer[i], done[i] = emb, pitch, err, True
        if count % log_every == 0 or already + count == n:
            rate = (time.perf_counter() - started) / count
            print(f"{already + count}/{n} voices, {rate:.2f} s/voice", flush=True)
            if checkpoint is not None:
                write(checkpoint, arrays())

    for count, result in enumerate(
        _measured(jobs, workers, (str(models_dir), use_asr, sentences)), start=1
    ):
        record(count, result)
    return arrays()


def _measured(
    jobs: list[tuple[int, np.ndarray]], workers: int, init_args: tuple[str, bool, tuple[str, ...]]
) -> Iterator[tuple[int, np.ndarray, float, float]]:
    """:func:`_measure` over ``jobs``, in order, on ``workers`` processes."""
    if workers <= 1:
        # In-process: no spawn start-up cost (tests, tiny builds).
        _init_worker(*init_args)
        yield from map(_measure, jobs)
        return
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=init_args
    ) as pool:
        yield from pool.map(_measure, jobs)


def resumable_rows(
    path: Path,
    basis: StyleBasis,
    recipes: list[VoiceRecipe],
    seed: int,
    digest: str,
    use_asr: bool,
    sentences: tuple[str, ...],
) -> dict[str, np.ndarray]:
    """The measurements of an earlier build, checked to be this build's prefix."""
    old = dict(np.load(path, allow_pickle=False))
    k = len(old["f0_median"])
    same = (
        int(old["format_version"]) == FORMAT_VERSION
        and int(old["seed"]) == seed
        and str(old["packs_digest"]) == digest
        and tuple(str(s) for s in old["sentences"]) == tuple(sentences)
        and np.array_equal(old["directions"], basis.directions)
        and k <= len(recipes)
        and bool(np.all(np.isnan(old["wer"]))) != use_asr
    )
    if same:
        for column, attribute in (
            ("timbre_weights", "timbre_weights"),
            ("timbre_coeffs", "timbre_coeffs"),
            ("prosody_weights", "prosody_weights"),
        ):
            ours = np.stack([getattr(r, attribute) for r in recipes[:k]])
            same = same and np.array_equal(old[column], ours)
    if not same:
        raise SystemExit(f"{path} is not a prefix of this build (seed, packs, sentences, ASR)")
    return old


def write(path: Path, arrays: dict[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)  # type: ignore[arg-type]  # numpy stub quirk
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--voices", type=int, default=300)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-asr", action="store_true", help="skip the Whisper WER column")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--models-dir", type=Path, default=DEFAULT_MODELS)
    parser.add_argument(
        "--resume", type=Path, help="an earlier, smaller build of the same seed: reuse its voices"
    )
    parser.add_argument(
        "--extend",
        type=Path,
        help="keep this atlas's voices and add voices on the installed extra packs",
    )
    parser.add_argument(
        "--extra-voices", type=int, default=250, help="random voices added by --extend"
    )
    args = parser.parse_args(argv)
    if args.extend is not None:
        extended = extend(
            args.extend, args.extra_voices, workers=args.workers, models_dir=args.models_dir
        )
        write(args.out, extended)
        print(f"wrote {len(extended['embeddings'])} voices")
        return 0
    result = build(
        args.voices,
        seed=args.seed,
        workers=args.workers,
        use_asr=not args.no_asr,
        models_dir=args.models_dir,
        checkpoint=args.out,
        resume=args.resume,
    )
    write(args.out, result)
    print(f"wrote {len(result['embeddings'])} voices")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
