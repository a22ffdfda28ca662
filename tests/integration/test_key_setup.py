"""API keys are opened from Settings in one place (voxclone.key_setup)."""

from __future__ import annotations

import ast
from pathlib import Path

import voxclone
from voxclone.api.first_key import create_first_admin_key
from voxclone.config import Settings
from voxclone.key_setup import open_key_store
from voxclone.runtime.keys import KeyStore

SRC = Path(voxclone.__file__).parent


def test_the_key_store_is_where_the_settings_say(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    with open_key_store(settings) as store:
        plaintext, record = store.create("ci", {"tts"})
    assert (tmp_path / "keys.sqlite3").is_file()
    with KeyStore(tmp_path / "keys.sqlite3") as same:
        found = same.authenticate(plaintext)
    assert found is not None and found.id == record.id
    # `voxclone serve`'s first admin key goes to the same store: it has held a key.
    assert create_first_admin_key(settings) is None


def test_no_module_but_key_setup_builds_a_key_store() -> None:
    builders = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name == "KeyStore":
                    builders.append(str(path.relative_to(SRC)))
    assert builders == ["key_setup.py"]
