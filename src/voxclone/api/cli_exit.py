"""The ``voxclone`` command's exit codes, and the one line it prints for a failure.

A script can tell a mistake in what was asked (2) from a server that is not
there (3), a port another process holds (4) and a failure of the work itself
(1). Every one of them is a single ``voxclone: error: ...`` line on stderr;
a traceback is a bug (``-v`` shows the one behind a file-system error).
"""

from __future__ import annotations

from voxclone.errors import VoxcloneError

EXIT_OK = 0
# The work failed, not the request: the service or the server erred (5xx), a job failed.
EXIT_FAILED = 1
# A mistake in what was asked: a bad flag or value, a missing or unreadable
# file, audio that cannot be used, a voice that does not exist (4xx).
EXIT_USAGE = 2
# No server answers at the URL the command was told to use (--server).
EXIT_UNREACHABLE = 3
# ``voxclone serve`` cannot listen: the port is in use (or the address is not this host's).
EXIT_CANNOT_LISTEN = 4
EXIT_INTERRUPTED = 130

EPILOG = """\
exit codes:
  0    done
  1    the work failed (a server or service error, a failed job)
  2    a mistake in what was asked: a bad flag or value, a missing or unreadable
       file, audio that cannot be used, an unknown voice
  3    no server answers at the URL given with --server
  4    serve: the port is in use or the address cannot be bound (use --port N)
  130  interrupted (Ctrl-C)
every failure is one line on stderr, starting "voxclone: error:"
"""


def exit_code(exc: VoxcloneError) -> int:
    """The exit code for an error the command reports: the caller's mistakes
    (4xx) are EXIT_USAGE, a server that did not answer EXIT_UNREACHABLE."""
    from voxclone.api.cli_remote import ServerUnreachable

    if isinstance(exc, ServerUnreachable):
        return EXIT_UNREACHABLE
    return EXIT_USAGE if exc.status < 500 else EXIT_FAILED


def file_problem(exc: OSError) -> tuple[str, int]:
    """(one line, exit code) for a file-system error: a path the user named
    (missing, unreadable, a directory) is their mistake, anything else the
    command's failure (a full disk, a broken pipe)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is not None:
        return f"{exc.filename}: {reason}", EXIT_USAGE
    return reason, EXIT_FAILED
