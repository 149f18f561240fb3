"""``navi-memory reembed``: move the stored vectors to a new embedding model while searches go on.

The store opens with the new model (``--embeddings`` / ``NAVI_MEMORY_EMBEDDINGS``) and the old one
(``--from`` / ``NAVI_MEMORY_PREVIOUS_EMBEDDINGS``); every process serving users should run with both
until the command says the move is complete (``operations/embedding.py`` explains the move).
"""

from __future__ import annotations

import argparse
import sys

from .common import AddCommand, integer, json_option, print_json, user_option


def cmd_reembed(args: argparse.Namespace) -> None:
    from ..models import ReembedReport
    from ..store import MemoryStore

    def shown(report: ReembedReport) -> None:
        if not args.json:
            print(f"\rusers moved {report.users_moved}, vectors made {report.embedded}", end="", file=sys.stderr,
                  flush=True)

    with MemoryStore.open(args.db, args.embeddings, previous_embeddings=args.previous) as store:
        report = store.reembed(user_id=args.user, batch_size=args.batch_size, items_per_second=args.rate,
                               max_users=args.max_users, progress=shown)
    if args.json:
        print_json(report)
        return
    print(file=sys.stderr)
    print(f"{report.previous_model} -> {report.model}: {report.users_moved} users moved this run,"
          f" {report.users_remaining} still to move, {report.embedded} vectors made, {report.failed} failed"
          + (f", paused {report.paused_seconds:.1f} s" if report.paused_seconds else ""))
    print("complete: every user's searches read the new model; run without the previous embeddings now"
          if report.complete else "not complete: run the command again to go on")


def add_commands(command: AddCommand) -> None:
    """Register ``reembed`` on the main parser (``command`` is ``build_parser``'s helper)."""
    p = command("reembed", cmd_reembed, "move the vectors to the current embedding model without a pause in search")
    p.add_argument("--from", dest="previous", metavar="MODEL", default=None,
                   help="the model the vectors were made with, as provider:model (default"
                        " $NAVI_MEMORY_PREVIOUS_EMBEDDINGS)")
    user_option(p, required=False)
    json_option(p)
    p.add_argument("--batch-size", type=integer("batch_size"), default=32, help="texts per embedding call (default 32)")
    p.add_argument("--rate", type=float, default=None, metavar="ITEMS_PER_S",
                   help="most texts embedded per second (default: no limit)")
    p.add_argument("--max-users", type=integer("max_users"), default=None, help="stop after moving this many users")
