"""What starting voxclone imports: a server or ``say`` without Redis configured
must not pay for the redis package (~0.7 s of `voxclone say`'s start-up on
2 cores, measured with ``python -X importtime``; issue #20)."""

from __future__ import annotations

import subprocess
import sys


def test_speech_path_and_server_do_not_import_redis_unless_configured() -> None:
    code = (
        "import sys\n"
        "import voxclone.api.app, voxclone.api.cli, voxclone.bootstrap, voxclone.service.speech\n"
        "print(sorted(m for m in sys.modules if m == 'redis' or m.startswith('redis.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.strip() == "[]", out
