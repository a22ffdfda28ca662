"""Loading a home's signing key imports no cryptography, checked in a fresh child
interpreter (moved from tests/unit/test_signing_key.py, issue 51).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from voxclone.runtime.signing_key import (
    load_or_create,
)


def test_loading_this_homes_key_does_not_import_cryptography(tmp_path: Path) -> None:
    load_or_create(tmp_path)
    code = (
        "import sys; from pathlib import Path; "
        "from voxclone.runtime.signing_key import load_or_create; "
        f"load_or_create(Path({str(tmp_path)!r})); "
        "print('cryptography' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
