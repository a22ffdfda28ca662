"""Settings of the servers the kill -9 tests start and restart on one home:
one worker, a fast start, and leases short enough that the second server
takes over a dead one's work within seconds, not the default 30 s."""

from __future__ import annotations

READY_TIMEOUT_S = 300.0
RESTART_ENV = {
    "VOXCLONE_WORKERS": "1",
    "VOXCLONE_WARM_CLONING": "false",
    "VOXCLONE_RATE_LIMIT_PER_MINUTE": "0",
    "VOXCLONE_FAST_LANE_THREADS": "0",  # one engine session: a faster start
    "VOXCLONE_JOB_LEASE_S": "2",
    "VOXCLONE_JOB_POLL_S": "0.2",
}
