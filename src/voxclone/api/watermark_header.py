"""``X-Voxclone-Watermark`` on every response that carries speech.

``perth`` when the server marks its audio (Settings.watermark, on by
default), ``none`` when the operator turned marking off or the watermark's
weights are not installed (synth/audio/watermark.py ``unavailable``), or the
caller's key is waived (Settings.watermark_per_key and the key's
``speech:unmarked`` scope: api/auth.py sets ``request.state.unmarked``). Set here, in one
place, rather than in each route: audio responses (any ``audio/*`` body,
streams included) and the JSON routes that embed audio (captions, dialogue)
all get it, whichever route made them.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voxclone.synth.audio import watermark

HEADER = b"x-voxclone-watermark"
_AUDIO_IN_JSON = ("caption", "dialogue")


class WatermarkHeaderMiddleware:
    def __init__(self, app: ASGIApp, *, marked: bool) -> None:
        self.app = app
        self.marked = marked

    @property
    def value(self) -> bytes:
        # Asked per response: without the weights (or after they failed to
        # load) speech is served unmarked, and says so.
        return b"perth" if self.marked and watermark.unavailable() is None else b"none"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        speech_json = any(part in path for part in _AUDIO_IN_JSON)

        async def send_marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if ctype.startswith(b"audio/") or (speech_json and message["status"] < 400):
                    # Auth (or a job's own record) set it: a per-key waiver.
                    unmarked = bool(scope.get("state", {}).get("unmarked"))
                    headers.append((HEADER, b"none" if unmarked else self.value))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_marked)
