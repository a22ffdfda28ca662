"""Plain text tags saying a whole file is AI-generated, in each format's own place.

C2PA-unaware players and tools show these: WAV gets a RIFF ``LIST/INFO``
chunk (ISFT software, ICMT comment), MP3 an ID3v2.3 tag (TSSE, COMM and
TXXX:AI_GENERATED), FLAC a Vorbis comment block (ENCODER, COMMENT,
AI_GENERATED). Opus, AAC (ADTS) and raw PCM get none: an Ogg comment header
means re-paging the stream and recomputing page CRCs, ADTS and PCM have no
place for text; their provenance is the watermark alone.

The few bytes are written here rather than with mutagen (GPL-2.0+, which this
Apache-2.0 project does not ship). Tags are added before the C2PA manifest
is signed (service/c2pa_manifest.py), so the manifest's hash covers them.
"""

from __future__ import annotations

import io
import shutil
import struct
from dataclasses import dataclass
from typing import IO

TAGGED_FORMATS = frozenset({"wav", "mp3", "flac"})


@dataclass(frozen=True)
class PlainTags:
    software: str  # "voxclone 0.1.0"
    comment: str  # "AI-generated speech ..."


def add_tags(data: bytes, fmt: str, tags: PlainTags) -> bytes:
    """``data`` (a whole file of format ``fmt``) with ``tags``."""
    out = io.BytesIO()
    write_tagged(io.BytesIO(data), out, fmt, tags)
    return out.getvalue()


def write_tagged(src: IO[bytes], out: IO[bytes], fmt: str, tags: PlainTags) -> None:
    """Copy the whole file in ``src`` (format ``fmt``, read from its start)
    into ``out`` with ``tags``, unchanged for a format that has no place for
    them or bytes that are not that format. Only the head is held in memory:
    a speech job's hour of audio is copied, not loaded."""
    src.seek(0)
    if fmt == "mp3":
        out.write(_id3(tags))
    elif fmt == "wav":
        head = src.read(12)
        if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
            _copy_wav(src, out, head, tags)
            return
        src.seek(0)
    elif fmt == "flac":
        head = src.read(4)
        if head == b"fLaC":
            out.write(_flac_head(src, tags))
        else:
            src.seek(0)
    shutil.copyfileobj(src, out)


def _copy_wav(src: IO[bytes], out: IO[bytes], head: bytes, tags: PlainTags) -> None:
    size = src.seek(0, 2)
    src.seek(12)
    body = bytearray(b"INFO")
    for key, text in ((b"ISFT", tags.software), (b"ICMT", tags.comment)):
        value = text.encode("utf-8") + b"\0"
        body += key + struct.pack("<I", len(value)) + value
        if len(value) % 2:
            body += b"\0"  # RIFF chunks start on even offsets
    pad = b"\0" if size % 2 else b""
    chunk = b"LIST" + struct.pack("<I", len(body)) + body
    out.write(head[:4] + struct.pack("<I", size + len(pad) + len(chunk) - 8) + head[8:12])
    shutil.copyfileobj(src, out)
    out.write(pad + chunk)


def _id3(tags: PlainTags) -> bytes:
    """An ID3v2.3 tag (the version every player reads), Latin-1 text frames."""

    def frame(fid: bytes, payload: bytes) -> bytes:
        return fid + struct.pack(">I", len(payload)) + b"\0\0" + payload

    def latin1(text: str) -> bytes:
        return text.encode("latin-1", "replace")

    frames = (
        frame(b"TSSE", b"\0" + latin1(tags.software))
        + frame(b"COMM", b"\0eng\0" + latin1(tags.comment))
        + frame(b"TXXX", b"\0AI_GENERATED\0true")
    )
    size = len(frames)
    # The tag size is "syncsafe": 7 bits per byte.
    safe = bytes((size >> shift) & 0x7F for shift in (21, 14, 7, 0))
    return b"ID3\x03\x00\x00" + safe + frames


def _flac_head(src: IO[bytes], tags: PlainTags) -> bytes:
    """FLAC's metadata blocks (read from ``src``, left at the first audio
    frame) with ours in its Vorbis comment block."""
    comments = [
        f"ENCODER={tags.software}",
        f"COMMENT={tags.comment}",
        "AI_GENERATED=true",
    ]
    blocks = []
    while True:
        header = src.read(4)
        length = int.from_bytes(header[1:4], "big")
        blocks.append((header[0] & 0x7F, src.read(length)))
        if header[0] & 0x80 or len(header) < 4:
            break
    vendor, existing = b"voxclone", list[bytes]()
    kept = []
    for kind, payload in blocks:
        if kind == 4:  # one VORBIS_COMMENT block only: ours joins the encoder's
            vendor, existing = _vorbis_comments(payload)
        else:
            kept.append((kind, payload))
    entries = existing + [c.encode("utf-8") for c in comments]
    comment = struct.pack("<I", len(vendor)) + vendor + struct.pack("<I", len(entries))
    comment += b"".join(struct.pack("<I", len(e)) + e for e in entries)
    kept.insert(1, (4, comment))  # STREAMINFO stays first
    out = bytearray(b"fLaC")
    for index, (kind, payload) in enumerate(kept):
        last = 0x80 if index == len(kept) - 1 else 0
        out += bytes([last | kind]) + len(payload).to_bytes(3, "big") + payload
    return bytes(out)


def _vorbis_comments(payload: bytes) -> tuple[bytes, list[bytes]]:
    (vendor_len,) = struct.unpack_from("<I", payload, 0)
    vendor = payload[4 : 4 + vendor_len]
    pos = 4 + vendor_len
    (count,) = struct.unpack_from("<I", payload, pos)
    pos += 4
    entries = []
    for _ in range(count):
        (n,) = struct.unpack_from("<I", payload, pos)
        entries.append(payload[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return vendor, entries
