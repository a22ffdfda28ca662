"""Logs are plain text for a person at a terminal and JSON lines for collectors."""

from __future__ import annotations

import io
import json
import logging

import pytest

from voxclone.api.observability import configure_logging
from voxclone.api.server import ready_line
from voxclone.config import Settings


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_root_logging() -> object:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield None
    root.handlers[:] = handlers
    root.setLevel(level)


def _emit(stream: io.StringIO) -> list[str]:
    logging.getLogger("voxclone.api").info("models loaded in %.1f s", 2.5)
    logging.getLogger("voxclone.access").info(
        "request",
        extra={
            "fields": {
                "event": "request",
                "method": "GET",
                "route": "/v1/tts",
                "status": 200,
                "latency_ms": 12.5,
                "request_id": "abc",
            }
        },
    )
    return stream.getvalue().splitlines()


def test_auto_is_text_on_a_terminal() -> None:
    stream = _Tty()
    assert configure_logging("auto", stream=stream) == "text"
    first, access = _emit(stream)
    assert first.endswith("INFO    voxclone.api: models loaded in 2.5 s")
    assert "GET /v1/tts 200 12.5 ms" in access and "request_id=abc" in access
    assert not first.startswith("{")


def test_auto_is_json_when_not_a_terminal() -> None:
    stream = io.StringIO()
    assert configure_logging("auto", stream=stream) == "json"
    first, access = (json.loads(line) for line in _emit(stream))
    assert first["message"] == "models loaded in 2.5 s"
    assert access["route"] == "/v1/tts" and access["status"] == 200


def test_format_can_be_forced_either_way() -> None:
    assert configure_logging("json", stream=_Tty()) == "json"
    assert configure_logging("text", stream=io.StringIO()) == "text"
    with pytest.raises(ValueError):
        configure_logging("xml", stream=io.StringIO())
    assert Settings(log_format="text").log_format == "text"


def test_ready_line_names_ui_and_docs() -> None:
    line = ready_line(Settings(host="127.0.0.1", port=8123))
    assert line == (
        "voxclone ready — web UI http://127.0.0.1:8123/  API docs http://127.0.0.1:8123/docs"
    )
    assert "http://[::1]:8000/docs" in ready_line(Settings(host="::1", port=8000))
