"""``voxclone keys create | list | revoke``: manage API keys on this machine.

Creating the first key changes how the server is used: every API request then
needs it (the web UI, curl, OpenAI clients, ``voxclone say/clone`` through the
server), and a key sees only the voices of its owner. ``create`` therefore
says what now needs the key and where it goes, and whose voices it sees; the
voices cloned before any key (owner ``local``) stay visible to a key created
with ``--adopt-local`` (the same as ``--owner local``). ``revoke`` says what
happens when the last active key goes: the server stays locked (it does not
return to key-less mode) until a new key is created.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from voxclone.config import Settings
from voxclone.runtime.key_scopes import LOCAL_OWNER, SCOPES


def add_keys_parser(subparsers: Any) -> argparse.ArgumentParser:
    keys = subparsers.add_parser("keys", help="create, list or revoke API keys")
    ksub = keys.add_subparsers(dest="keys_command", required=True)
    create = ksub.add_parser(
        "create",
        help="create a key and print it (shown only once); from the first key on, "
        "every API request needs one",
    )
    create.add_argument("--name", required=True, help="what the key is for")
    create.add_argument(
        "--scopes",
        required=True,
        help=f"comma-separated: {', '.join(sorted(SCOPES))}",
    )
    owner = create.add_mutually_exclusive_group()
    owner.add_argument(
        "--owner",
        help="tenant whose voices the key sees and creates (default: a tenant of its own; "
        f"'{LOCAL_OWNER}': the voices cloned before there were keys)",
    )
    owner.add_argument(
        "--adopt-local",
        action="store_true",
        help=f"the key acts as owner '{LOCAL_OWNER}' and sees the voices cloned without keys "
        f"(the same as --owner {LOCAL_OWNER})",
    )
    ksub.add_parser("list", help="all keys (never their secrets)")
    revoke = ksub.add_parser(
        "revoke",
        help="revoke a key by id (revoking the last one locks the server until a new key exists)",
    )
    revoke.add_argument("key_id")
    return keys


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M")


def cmd_keys(args: argparse.Namespace, settings: Settings) -> int:
    settings.home.mkdir(parents=True, exist_ok=True)
    from voxclone.key_setup import open_key_store

    store = open_key_store(settings)
    try:
        if args.keys_command == "create":
            scopes = {s.strip() for s in args.scopes.split(",") if s.strip()}
            first = not store.list(include_revoked=True)
            owner = LOCAL_OWNER if args.adopt_local else args.owner
            plaintext, record = store.create(args.name, scopes, owner=owner)
            print(plaintext)
            print(
                f"created {record.id} (owner {record.owner}, scopes "
                f"{','.join(sorted(record.scopes))}); store the key now, it is not shown again",
                file=sys.stderr,
            )
            print(_usage(settings, record.owner, first), file=sys.stderr)
            return 0
        if args.keys_command == "list":
            for r in store.list():
                status = "active" if r.active else f"revoked {_when(r.revoked_at)}"
                scope_list = ",".join(sorted(r.scopes))
                print(
                    f"{r.id:22s} {r.prefix}…  {r.name[:24]:24s} owner={r.owner:22s} "
                    f"scopes={scope_list:36s} created {_when(r.created_at)}  {status}"
                )
            return 0
        record = store.revoke(args.key_id)
        print(f"revoked {record.id} ({record.name})")
        if store.count_active() == 0 and not settings.require_keys:
            print(
                "that was the last active key: the server now refuses every API request "
                "(401), the web UI's included, until a new key is created with "
                "'voxclone keys create'. It does not return to key-less mode (a revoked, "
                "maybe leaked key must not open it). voxclone say/clone on this machine "
                "still work: they load the models themselves.",
                file=sys.stderr,
            )
        return 0
    finally:
        store.close()


def _usage(settings: Settings, owner: str, first: bool) -> str:
    """What needs the key now, where it goes, and whose voices it sees."""
    from voxclone.api.cli_remote import default_server_url

    url = default_server_url(settings)
    lines = []
    if first:
        lines.append(
            "This is the server's first key: from now on every API request needs a key "
            "(a running server notices within a second; /healthz, /readyz and the docs "
            "stay open):"
        )
    else:
        lines.append("Use it:")
    lines += [
        f"  web UI   {url}/ > Connection settings > API key: paste it there",
        "  curl     -H 'Authorization: Bearer <key>'",
        f'  OpenAI   OpenAI(base_url="{url}/v1", api_key="<key>")',
        "  CLI      export VOXCLONE_API_KEY=<key>  (say/clone through the server; "
        "without it they load the models themselves)",
    ]
    mine = _voice_count(settings, owner)
    local = mine if owner == LOCAL_OWNER else _voice_count(settings, LOCAL_OWNER)
    if owner == LOCAL_OWNER:
        lines.append(
            f"It acts as owner '{LOCAL_OWNER}': it sees the {_voices(local)} cloned without "
            "keys, and what it clones is theirs."
        )
    else:
        lines.append(
            f"It acts as owner '{owner}' and sees only that owner's voices ({_voices(mine)} now)."
        )
        if local:
            lines.append(
                f"The {_voices(local)} cloned without keys "
                f"{'belongs' if local == 1 else 'belong'} to owner '{LOCAL_OWNER}': "
                "to use them over the API, create a key with --adopt-local "
                f"(the same as --owner {LOCAL_OWNER})."
            )
    return "\n".join(lines)


def _voices(count: int) -> str:
    return f"{count} voice" if count == 1 else f"{count} voices"


def _voice_count(settings: Settings, owner: str) -> int:
    """Cloned and saved voices of ``owner`` in this home's library (0 if it
    cannot be read: the hint is advice, not a reason to fail the command)."""
    try:
        from voxclone.bootstrap import build_library

        library = build_library(settings)
    except Exception:  # a library that cannot open here (e.g. its database is elsewhere)
        return 0
    try:
        count = 0
        page = 100
        while True:
            batch = library.store.list(owner, limit=page, offset=count)
            count += len(batch)
            if len(batch) < page:
                return count
    finally:
        library.close()
