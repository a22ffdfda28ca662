"""Write a corpus of hostile "audio" uploads: files an attacker or a broken client sends.

Generated rather than committed (the decompression bombs would be megabytes
of repository for a few lines of code). Each file is small on disk; some
claim or decode to far more than any limit allows. Used by
tests/api/test_hostile_uploads.py, which posts every file to the enrollment
route and expects a 4xx with flat memory.

    python scripts/make_hostile_corpus.py [OUT_DIR]   # default tests/data/hostile
"""

from __future__ import annotations

import io
import math
import struct
import sys
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import soundfile as sf

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "hostile"
RATE = 16_000


def _wav_header(
    *,
    channels: int = 1,
    rate: int = RATE,
    bits: int = 16,
    fmt_code: int = 1,
    data_size: int = 0,
    riff_size: int | None = None,
    fmt_size: int = 16,
) -> bytes:
    block = channels * bits // 8
    fmt = struct.pack(
        "<HHIIHH",
        fmt_code,
        channels,
        rate & 0xFFFFFFFF,
        (rate * block) & 0xFFFFFFFF,
        block & 0xFFFF,
        bits,
    )
    fmt = fmt[:fmt_size].ljust(fmt_size, b"\0")
    body = b"WAVE" + b"fmt " + struct.pack("<I", fmt_size) + fmt + b"data"
    body += struct.pack("<I", data_size & 0xFFFFFFFF)
    size = len(body) + data_size if riff_size is None else riff_size
    return b"RIFF" + struct.pack("<I", size & 0xFFFFFFFF) + body


def _speechlike(seconds: float, rate: int = RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.2 * np.sin(2 * np.pi * 140 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)


def _sf_bytes(samples: np.ndarray, rate: int, fmt: str, subtype: str | None = None) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, samples, rate, format=fmt, subtype=subtype)
    return buf.getvalue()


def _long_silence_flac(seconds: float, rate: int = 8_000) -> bytes:
    """Hours of digital silence compress to almost nothing: a decompression bomb."""
    buf = io.BytesIO()
    block = np.zeros(rate * 60, np.float32)
    with sf.SoundFile(buf, "w", rate, 1, format="FLAC", subtype="PCM_16") as f:
        for _ in range(int(math.ceil(seconds / 60))):
            f.write(block)
    return buf.getvalue()


def _flac_lying_streaminfo() -> bytes:
    """A real FLAC whose STREAMINFO claims 2^36 - 1 samples."""
    data = bytearray(_sf_bytes(_speechlike(1.0), RATE, "FLAC"))
    # STREAMINFO starts at byte 8; total samples are the low 36 bits of bytes 21..26.
    data[21] = (data[21] & 0xF0) | 0x0F
    data[22:26] = b"\xff\xff\xff\xff"
    return bytes(data)


def _float_wav(values: list[float]) -> bytes:
    samples = np.array(values * 4000, np.float32)
    header = _wav_header(fmt_code=3, bits=32, data_size=samples.nbytes)
    return header + samples.tobytes()


def _zip_of(name: str, payload: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, payload)
    return buf.getvalue()


def _id3_huge() -> bytes:
    # ID3v2 header with the largest synchsafe size, then nothing.
    return b"ID3\x04\x00\x00\x7f\x7f\x7f\x7f" + b"\0" * 64


def _mp3_junk_frames() -> bytes:
    return (b"\xff\xfb\x90\x64" + b"\x55" * 413) * 50


def _ogg_bad_page() -> bytes:
    return b"OggS\x00\x02" + b"\0" * 8 + b"\x01\x00\x00\x00" * 3 + b"\xff" + b"\xff" * 255 + b"x"


def _matroska_junk() -> bytes:
    return b"\x1a\x45\xdf\xa3\x01\x00\x00\x00\x00\x00\x00\x1f" + b"\x42\x86\x81\x01" * 200


def _mp4_huge_box() -> bytes:
    return struct.pack(">I", 0xFFFFFFF0) + b"ftypM4A " + b"\0" * 32 + b"\x00\x00\x00\x01mdat"


CORPUS: dict[str, Callable[[], bytes]] = {
    "empty.wav": lambda: b"",
    "one_byte.wav": lambda: b"R",
    "wav_header_only.wav": lambda: _wav_header(),
    "wav_truncated_data.wav": lambda: _wav_header(data_size=RATE * 2 * 10) + b"\x01\x00" * 50,
    "wav_data_size_4gib.wav": lambda: _wav_header(data_size=0xFFFFFFFF) + b"\0" * 1000,
    "wav_riff_size_lies.wav": lambda: (
        _wav_header(data_size=200, riff_size=0xFFFFFFFF) + b"\0" * 200
    ),
    "wav_65535_channels.wav": lambda: (
        _wav_header(channels=65535, data_size=65535 * 2) + b"\0" * (65535 * 2)
    ),
    "wav_rate_zero.wav": lambda: _wav_header(rate=0, data_size=1000) + b"\0" * 1000,
    "wav_rate_4ghz.wav": lambda: _wav_header(rate=4_000_000_000, data_size=1000) + b"\0" * 1000,
    "wav_bits_zero.wav": lambda: _wav_header(bits=0, data_size=1000) + b"\0" * 1000,
    "wav_bits_odd.wav": lambda: _wav_header(bits=13, data_size=1000) + b"\0" * 1000,
    "wav_unknown_codec.wav": lambda: _wav_header(fmt_code=0x1234, data_size=1000) + b"\0" * 1000,
    "wav_fmt_size_huge.wav": lambda: b"RIFF\xff\xff\xff\x7fWAVEfmt \xff\xff\xff\x7f" + b"\0" * 64,
    "wav_no_fmt.wav": lambda: b"RIFF\x24\x00\x00\x00WAVEdata\x10\x00\x00\x00" + b"\0" * 16,
    "wav_nan_samples.wav": lambda: _float_wav([0.1, math.nan, -0.1]),
    "wav_inf_samples.wav": lambda: _float_wav([0.1, math.inf, -math.inf]),
    "wav_declares_one_day.wav": lambda: (
        _wav_header(rate=8000, bits=8, data_size=8000 * 86400) + b"\x80" * 4000
    ),
    "wav_one_sample.wav": lambda: _sf_bytes(np.zeros(1, np.float32), RATE, "WAV"),
    "wav_silence.wav": lambda: _sf_bytes(np.zeros(RATE * 5, np.float32), RATE, "WAV"),
    "wav_too_short_speech.wav": lambda: _sf_bytes(_speechlike(0.5), RATE, "WAV"),
    "wav_clipped_square.wav": lambda: _sf_bytes(
        np.sign(_speechlike(5.0)).astype(np.float32), RATE, "WAV"
    ),
    "flac_20_minutes_silence.flac": lambda: _long_silence_flac(20 * 60),
    "flac_streaminfo_lies.flac": _flac_lying_streaminfo,
    "flac_magic_only.flac": lambda: b"fLaC" + b"\0" * 40,
    "flac_truncated.flac": lambda: _sf_bytes(_speechlike(4.0), RATE, "FLAC")[:300],
    "ogg_bad_page.ogg": _ogg_bad_page,
    "mp3_id3_huge.mp3": _id3_huge,
    "mp3_junk_frames.mp3": _mp3_junk_frames,
    "matroska_junk.webm": _matroska_junk,
    "mp4_huge_box.m4a": _mp4_huge_box,
    "aiff_truncated.aiff": lambda: b"FORM\xff\xff\xff\xffAIFFCOMM\x00\x00\x00\x12" + b"\0" * 8,
    "png_as_wav.wav": lambda: b"\x89PNG\r\n\x1a\n" + b"\0" * 200,
    "pdf_as_wav.wav": lambda: b"%PDF-1.7\n" + b"x" * 500,
    "zip_of_wav.wav": lambda: _zip_of("a.wav", _sf_bytes(_speechlike(4.0), RATE, "WAV")),
    "zip_bomb.wav": lambda: _zip_of("bomb.bin", b"\0" * (8 << 20)),
    "gzip_as_flac.flac": lambda: zlib.compress(b"\0" * (4 << 20), 9),
    "text_as_wav.wav": lambda: b"hello, I am not audio at all\n" * 40,
    "wrong_magic_wave.wav": lambda: b"RIFF\x24\x00\x00\x00WAVX" + b"\0" * 100,
    "random_bytes.bin": lambda: np.random.default_rng(18).bytes(4096),
}


def make_corpus(out_dir: Path = DEFAULT_OUT) -> list[Path]:
    """Write every corpus file into ``out_dir`` (created); return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, build in CORPUS.items():
        path = out_dir / name
        path.write_bytes(build())
        paths.append(path)
    return paths


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    written = make_corpus(target)
    total = sum(p.stat().st_size for p in written)
    print(f"wrote {len(written)} files ({total / 1024:.0f} KiB) to {target}")
