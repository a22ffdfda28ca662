"""``voxclone keys create | list | revoke``: manage API keys on this machine."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from voxclone.config import Settings
from voxclone.runtime.key_scopes import SCOPES


def add_keys_parser(subparsers: Any) -> argparse.ArgumentParser:
    keys = subparsers.add_parser("keys", help="create, list or revoke API keys")
    ksub = keys.add_subparsers(dest="keys_command", required=True)
    create = ksub.add_parser("create", help="create a key and print it (shown only once)")
    create.add_argument("--name", required=True, help="what the key is for")
    create.add_argument(
        "--scopes",
        required=True,
        help=f"comma-separated: {', '.join(sorted(SCOPES))}",
    )
    create.add_argument("--owner", help="tenant that owns the voices (default: the key itself)")
    ksub.add_parser("list", help="all keys (never their secrets)")
    revoke = ksub.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("key_id")
    return keys


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M")


def cmd_keys(args: argparse.Namespace, settings: Settings) -> int:
    settings.home.mkdir(parents=True, exist_ok=True)
    from voxclone.runtime.keys import KeyStore

    store = KeyStore(settings.key_database_target)
    try:
        if args.keys_command == "create":
            scopes = {s.strip() for s in args.scopes.split(",") if s.strip()}
            plaintext, record = store.create(args.name, scopes, owner=args.owner)
            print(plaintext)
            print(
                f"created {record.id} (owner {record.owner}, scopes "
                f"{','.join(sorted(record.scopes))}); store the key now, it is not shown again",
                file=sys.stderr,
            )
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
        return 0
    finally:
        store.close()
