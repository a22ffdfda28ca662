"""A plain ``websockets`` client of the stream-input protocol, for the tests
and bench/realtime.py: send messages, collect what comes back with the time
each message arrived."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect


@dataclass
class Received:
    messages: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    close_code: int | None = None

    def audio(self, context_id: str | None = None) -> bytes:
        return b"".join(
            base64.b64decode(m["audio"])
            for _, m in self.messages
            if m.get("audio") and (context_id is None or m.get("contextId") == context_id)
        )

    def chars(self) -> str:
        return "".join(
            "".join(m["alignment"]["chars"]) + " " for _, m in self.messages if m.get("alignment")
        )

    def errors(self) -> list[dict[str, Any]]:
        return [m for _, m in self.messages if "error" in m]

    def finals(self) -> list[dict[str, Any]]:
        return [m for _, m in self.messages if m.get("isFinal")]


def ws_url(base: str, voice: str, *, multi: bool = False, **query: str) -> str:
    path = "multi-stream-input" if multi else "stream-input"
    q = "&".join(f"{k}={v}" for k, v in query.items())
    return f"{base.replace('http://', 'ws://')}/v1/text-to-speech/{voice}/{path}" + (
        f"?{q}" if q else ""
    )


def open_socket(url: str, headers: dict[str, str] | None = None) -> ClientConnection:
    return connect(url, additional_headers=headers or {}, open_timeout=10, max_size=None)


def send(ws: ClientConnection, **message: Any) -> None:
    ws.send(json.dumps(message))


def drain(ws: ClientConnection, into: Received, timeout_s: float = 60.0) -> Received:
    """Read until the server closes the socket (or ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            raw = ws.recv(timeout=max(0.01, deadline - time.monotonic()))
            into.messages.append((time.perf_counter(), json.loads(raw)))
    except ConnectionClosed as closed:
        into.close_code = closed.rcvd.code if closed.rcvd else None
    except TimeoutError:
        pass
    return into


def speak(base: str, voice: str, pieces: list[str], **query: str) -> Received:
    """One whole stream-input session: the first message, ``pieces``, the end."""
    with open_socket(ws_url(base, voice, multi=False, **query)) as ws:
        send(ws, text=" ", generation_config={"chunk_length_schedule": [120, 160, 250]})
        for piece in pieces:
            send(ws, text=piece, try_trigger_generation=True)
        send(ws, text="")
        return drain(ws, Received())
