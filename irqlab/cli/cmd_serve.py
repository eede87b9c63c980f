"""``irqlab serve``: the read-only web dashboard over a store (docs/serve.md)."""

from __future__ import annotations

import argparse

from irqlab.cli.common import EXIT_OK, UsageError, db_path, db_ref
from irqlab.store.location import default_db_path

HELP = "a read-only web dashboard over the store (runs, compare, trends, live)"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help=HELP,
                       description="Serve runs, one run, compare, trends and a running "
                                   "run's live windows as web pages (and JSON) from the "
                                   "store, read-only. Loopback only unless --bind says "
                                   "otherwise; then every request needs the token.")
    p.add_argument("--db", type=db_ref, default=None,
                   help=f"database file (default {default_db_path()}, or $IRQLAB_DB), or "
                        f"a lab store's postgresql:// URL")
    p.add_argument("--bind", default=None, metavar="ADDR:PORT",
                   help="address and port to listen on (default 127.0.0.1:8470; port 0: "
                        "a free port). A non-loopback address requires a token")
    p.add_argument("--token", default=None, metavar="TOKEN",
                   help="the token requests must carry (default: generated and printed "
                        "when the address is not loopback)")


def run(args: argparse.Namespace) -> int:
    from irqlab.serve.server import (DEFAULT_HOST, DEFAULT_PORT, choose_token, listen,
                                     parse_bind, serve)
    from irqlab.store import open_store

    try:
        bind = parse_bind(args.bind or f"{DEFAULT_HOST}:{DEFAULT_PORT}")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.token is not None and len(args.token) < 16:
        raise UsageError("--token: use at least 16 characters (or leave it out: one is "
                         "generated)")
    db = db_path(args)
    with open_store(db, read_only=True):   # a missing or foreign file: one line, exit 2
        pass
    token = choose_token(bind, args.token)

    def say(text: str) -> None:
        print(text, flush=True)

    try:
        sock = listen(bind)
    except OSError as exc:
        raise UsageError(f"cannot listen on {bind.host}:{bind.port}: {exc.strerror}; "
                         f"pick another with --bind ADDR:PORT (port 0: any free "
                         f"port)") from None
    serve(db, sock, bind, token, say)
    return EXIT_OK
