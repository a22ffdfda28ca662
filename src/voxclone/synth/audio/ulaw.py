"""G.711 mu-law, the telephony format (8 kHz, one byte a sample) voice agents
ask for to feed a phone line (Twilio media streams, SIP gateways).

Encoded here with numpy: ``audioop`` is deprecated and gone from Python 3.13.
"""

from __future__ import annotations

import numpy as np
import soxr

ULAW_RATE = 8000
# 14-bit arithmetic, as the reference coder (Sun's g711.c, which audioop follows).
_BIAS14 = 0x21
_CLIP14 = 8159
# Decoding works on the 16-bit scale.
_BIAS = 0x84


def ulaw_encode(samples: np.ndarray) -> bytes:
    """Float audio in [-1, 1] → G.711 mu-law bytes, bit for bit as ``audioop.lin2ulaw``."""
    pcm = np.clip(np.round(np.asarray(samples, np.float32) * 32767.0), -32768, 32767)
    x = pcm.astype(np.int32) >> 2
    mask = np.where(x < 0, 0x7F, 0xFF)
    mag = np.minimum(np.abs(x), _CLIP14) + _BIAS14
    # The segment: how many bits above the first six the magnitude spans
    # (8: past the top segment, coded as the largest value).
    seg = np.zeros_like(mag)
    for bound in (0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF):
        seg += mag > bound
    uval = np.where(seg >= 8, 0x7F, (seg << 4) | ((mag >> (seg + 1)) & 0x0F))
    return ((uval ^ mask) & 0xFF).astype(np.uint8).tobytes()


def ulaw_decode(data: bytes) -> np.ndarray:
    """G.711 mu-law bytes → float32 in [-1, 1] (tests and tools)."""
    u = ~np.frombuffer(data, np.uint8).astype(np.int32) & 0xFF
    sign = u & 0x80
    exponent = (u >> 4) & 0x07
    mantissa = u & 0x0F
    mag = (((mantissa << 3) + _BIAS) << exponent) - _BIAS
    return (np.where(sign != 0, -mag, mag) / 32768.0).astype(np.float32)


class UlawStreamEncoder:
    """Streams float audio at ``sr_in`` as 8 kHz mu-law (a ``StreamEncoder``)."""

    content_type = "audio/basic"
    sample_rate = ULAW_RATE

    def __init__(self, sr_in: int) -> None:
        self._resampler = soxr.ResampleStream(sr_in, ULAW_RATE, 1, dtype="float32", quality="HQ")
        self._finished = False

    def header(self) -> bytes:
        return b""

    def feed(self, chunk: np.ndarray) -> bytes:
        if self._finished:
            raise RuntimeError("feed() after finish()")
        out = self._resampler.resample_chunk(np.asarray(chunk, np.float32).reshape(-1))
        return ulaw_encode(out) if out.size else b""

    def finish(self) -> bytes:
        if self._finished:
            return b""
        self._finished = True
        tail = self._resampler.resample_chunk(np.zeros(0, np.float32), last=True)
        return ulaw_encode(tail) if tail.size else b""

    def close(self) -> None:
        self._finished = True
