"""Lexicon entries whose word holds a slash (``and/or``, ``24/7``): created over
HTTP, they must be readable and deletable over HTTP too (issue 37: the
``{word}`` path parameter stopped at the slash, so ``GET``/``DELETE`` answered
404 for an entry the listing showed), and through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from voxclone.api import cli


@pytest.mark.parametrize("path_word", ["and/or", "and%2For", "AND/OR"])
def test_an_entry_with_a_slash_is_read_and_deleted_over_http(
    client: TestClient, path_word: str
) -> None:
    entry = {"word": "and/or", "language": "en-us", "respelling": "and or"}
    created = client.post("/v1/lexicon", json=entry)
    assert created.status_code == 201, created.text
    try:
        # Other modules share this runtime's lexicon: look at this entry only.
        listed = client.get("/v1/lexicon", params={"language": "en-us"}).json()["entries"]
        assert [e["word"] for e in listed].count("and/or") == 1
        one = client.get(f"/v1/lexicon/en-us/{path_word}")
        assert one.status_code == 200, one.text
        assert one.json() == {**entry, "ipa": None}
        gone = client.delete(f"/v1/lexicon/en-us/{path_word}")
        assert gone.status_code == 204, gone.text
        assert client.get("/v1/lexicon/en-us/and/or").status_code == 404
        left = client.get("/v1/lexicon", params={"language": "en-us"}).json()["entries"]
        assert "and/or" not in [e["word"] for e in left]
    finally:
        client.delete("/v1/lexicon/en-us/and/or")


def test_a_missing_entry_with_a_slash_is_a_404_naming_the_word(client: TestClient) -> None:
    r = client.delete("/v1/lexicon/en-us/either/or")
    assert r.status_code == 404
    assert r.json()["error"]["field"] == "word" and "either/or" in r.json()["error"]["message"]


def test_the_cli_adds_lists_and_removes_an_entry_with_a_slash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path))
    monkeypatch.delenv("VOXCLONE_DATABASE_URL", raising=False)
    assert cli.main(["lexicon", "add", "24/7", "twenty four seven", "--respelling"]) == 0
    assert cli.main(["lexicon", "list"]) == 0
    assert "24/7" in capsys.readouterr().out
    assert cli.main(["lexicon", "remove", "24/7"]) == 0
    assert "removed en 24/7" in capsys.readouterr().out
    assert cli.main(["lexicon", "remove", "24/7"]) != 0  # gone: a one-line error
    assert "no lexicon entry for '24/7'" in capsys.readouterr().err
