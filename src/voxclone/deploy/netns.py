"""Run a command in a fresh network namespace that has only loopback.

Ray binds its workers' ports on every interface whatever node address it is
given; inside such a namespace "every interface" is 127.0.0.1, so local Ray
runs (tests, benchmarks) expose nothing. Needs ``unshare`` (util-linux), ``ip``
(iproute2) and the right to create a network namespace (root, or user
namespaces enabled).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence


def loopback_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` wrapped to run in a new network namespace with ``lo`` up."""
    return ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *argv]


def unavailable_reason() -> str | None:
    """Why a loopback-only namespace cannot be made here, or None if it can."""
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            return f"'{tool}' is not installed (util-linux / iproute2)"
    try:
        probe = subprocess.run(
            loopback_argv(["true"]), capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare --net failed: {exc}"
    if probe.returncode != 0:
        return f"unshare --net is not permitted here: {probe.stderr.strip()[:200]}"
    return None
