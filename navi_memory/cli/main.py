"""The ``navi-memory`` command. Every command calls the same store methods as the integrations.

Exit codes: 0 success, 1 unexpected failure, 2 bad input or a navi-memory error (one line on stderr).
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
import tempfile
from typing import Any, Callable, Sequence

from ..config import Settings, mask_password, parse_url
from ..errors import NaviMemoryError, SchemaError, ValidationError
from ..models import (
    FACT_CATEGORIES,
    FACT_SORT_FIELDS,
    FACT_SOURCES,
    FUSIONS,
    ITEM_TYPES,
    SEARCH_STATUSES,
)
from .common import (
    BadArgument,
    integer,
    json_option,
    one_line,
    open_store,
    print_json,
    score,
    user_option,
)

log = logging.getLogger("navi_memory.cli")


def cmd_migrate(args: argparse.Namespace) -> None:
    with open_store(args, embeddings=False) as store:
        version = store.migrate()
    print(f"schema version {version} at {parse_url(store.settings.url)}")


def cmd_add(args: argparse.Namespace) -> None:
    with open_store(args) as store:
        added = store.add_note(user_id=args.user, content=args.content, type=args.type, theme=args.theme,
                               title=args.title, tags=args.tag, pinned=args.pin, expires_days=args.expires_days,
                               dedup=not args.allow_duplicate)
    item = added.item
    if args.json:
        print_json(item)
    elif added.action == "existing":
        print(f"already stored as item {item.id} (theme {item.theme}): nothing added")
    else:
        state = item.embedding.state if item.embedding else "none (lexical only)"
        similar = f"; kept apart from the similar item(s) {', '.join(map(str, added.similar))}" if added.similar else ""
        print(f"added item {item.id} (theme {item.theme}, embedding {state}){similar}")


def cmd_get(args: argparse.Namespace) -> None:
    with open_store(args, embeddings=False, read_only=True) as store:
        item = store.get(args.id, user_id=args.user)
    if args.json:
        print_json(item)
    else:
        print(f"#{item.id} [{item.theme}/{item.type}/{item.status}{'/pinned' if item.pinned else ''}] {item.content}")


def cmd_update(args: argparse.Namespace) -> None:
    changes = {k: getattr(args, k) for k in ("content", "title", "theme", "type") if getattr(args, k) is not None}
    if not changes:
        raise ValidationError("nothing to update: give --content, --title, --theme or --type")
    with open_store(args) as store:
        item = store.update(args.id, user_id=args.user, **changes)
    print_json(item) if args.json else print(f"updated item {item.id}")


def cmd_pin(args: argparse.Namespace) -> None:
    with open_store(args, embeddings=False) as store:
        store.pin(args.id, user_id=args.user, pinned=not args.off)
    print(f"item {args.id} {'unpinned' if args.off else 'pinned'}")


def cmd_archive(args: argparse.Namespace) -> None:
    with open_store(args, embeddings=False) as store:
        store.archive(args.id, user_id=args.user, archived=not args.restore)
    print(f"item {args.id} {'restored' if args.restore else 'archived'}")


def cmd_delete(args: argparse.Namespace) -> None:
    with open_store(args, embeddings=False) as store:
        store.delete(args.id, user_id=args.user)
    print(f"item {args.id} deleted")


def cmd_list(args: argparse.Namespace) -> None:
    with open_store(args, embeddings=False, read_only=True) as store:
        items = store.list_items(user_id=args.user, theme=args.theme, types=args.type, status=args.status,
                                 limit=args.limit, offset=args.offset)
    if args.json:
        print_json(items)
        return
    for item in items:
        state = item.embedding.state if item.embedding else "-"
        print(f"{item.id:>6}  {item.created_at:%Y-%m-%d %H:%M}  {item.theme:<14} {item.type:<11} {state:<8} {one_line(item.content, 80)}")


def cmd_search(args: argparse.Namespace) -> None:
    with open_store(args, read_only=True) as store:
        results = store.search(args.query, user_id=args.user, limit=args.limit, theme=args.theme, types=args.type,
                               status=args.status, recency_days=args.recency_days, fusion=args.fusion,
                               timezone=args.timezone, min_score=args.min_score)
        floor = store.settings.min_score if args.min_score is None else args.min_score
    if results.hidden:  # on stderr: --json output stays the list of results
        print(f"{results.hidden} result(s) below the relevance floor {floor:g} hidden (--min-score 0 shows them)",
              file=sys.stderr)
    if args.json:
        print_json(results)
        return
    for r in results:
        flags = ",".join(name for name, on in r.signals.items() if on) or "-"
        text = one_line(r.snippet, 90)
        print(f"{r.id:>6}  {score(r.score)}  {flags:<20} {r.theme:<14} {text}")


# -- facts, summary, users -----------------------------------------------------------------

def _fact_lines(fact: Any, history: bool) -> list[str]:
    lines = [f"{fact.category:<12} {fact.key:<28} {fact.value}  ({fact.source}, confidence {fact.confidence})"]
    if history:
        lines += [f"{'':<12} {'':<28} was {old.value!r} from {old.valid_from:%Y-%m-%d} to {old.valid_to:%Y-%m-%d}"
                  for old in fact.history]
    return lines


def cmd_fact(args: argparse.Namespace) -> None:
    if args.fact_command == "list":
        cmd_fact_list(args)
        return
    if args.fact_command in ("get", "delete"):
        _category_and_key(args)
    with open_store(args, embeddings=None if args.fact_command == "set" else False,
                    read_only=args.fact_command == "get") as store:
        if args.fact_command == "set":
            change = store.upsert_fact(user_id=args.user, category=args.category, key=args.key, value=args.value,
                                       source=args.source, confidence=args.confidence,
                                       expires_days=args.expires_days, source_context=args.context,
                                       observed_at=args.observed_at)
            print_json(change) if args.json else print(f"{change.action}: {change.fact.category}/{change.fact.key}")
        elif args.fact_command == "get":
            fact = store.get_fact(args.key, user_id=args.user, category=args.category)
            print_json(fact) if args.json else print("\n".join(_fact_lines(fact, history=True)))
        else:
            count = store.delete_fact(args.key, user_id=args.user, category=args.category)
            print(f"deleted {count} fact(s)")


def _category_and_key(args: argparse.Namespace) -> None:
    """``fact get [CATEGORY] KEY``: a leading category is the same as ``--category``."""
    if len(args.key) > 2:
        raise ValidationError(f"fact {args.fact_command} takes [CATEGORY] KEY, got {len(args.key)} words")
    if len(args.key) == 2:
        category, args.key = args.key
        if category not in FACT_CATEGORIES:
            raise ValidationError(f"unknown fact category {category!r} (one of {', '.join(FACT_CATEGORIES)})")
        if args.category not in (None, category):
            raise ValidationError(f"two categories given: {category!r} and --category {args.category!r}")
        args.category = category
    else:
        args.key = args.key[0]


def cmd_fact_list(args: argparse.Namespace) -> None:
    """``fact list`` and its alias ``facts``. JSON always carries the history (one query more)."""
    with open_store(args, embeddings=False, read_only=True) as store:
        facts = store.get_all_facts(user_id=args.user, category=args.category, search=args.search,
                                    limit=args.limit, offset=args.offset, sort_by=args.sort_by,
                                    sort_order=args.order, include_history=args.history or args.json)
    if args.json:
        print_json(facts)
        return
    for fact in facts:
        print("\n".join(_fact_lines(fact, history=args.history)))
    if not facts:
        print(f"no facts stored for {args.user}" + (f" in {args.category}" if args.category else ""))


def fact_list_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--category", choices=FACT_CATEGORIES, help="only this category")
    p.add_argument("--search", help="only facts whose key or value contains this text")
    p.add_argument("--limit", type=integer("limit"), help="at most this many facts")
    p.add_argument("--offset", type=integer("offset"), default=0, help="skip this many first (paging)")
    p.add_argument("--sort-by", default="category", choices=FACT_SORT_FIELDS, help="sort field (default category)")
    p.add_argument("--order", default="desc", choices=("asc", "desc"), help="sort order (default desc)")
    p.add_argument("--history", action="store_true", help="show earlier values under each fact")


def cmd_summary(args: argparse.Namespace) -> None:
    with open_store(args, embeddings=False, read_only=args.set is None) as store:
        if args.set is not None:
            summary = store.set_summary(args.set, user_id=args.user)
            print(f"summary version {summary.version} stored")
        elif args.history:
            history = store.summary_history(user_id=args.user)
            print_json(history) if args.json else [print(f"v{s.version} {s.created_at:%Y-%m-%d %H:%M}\n{s.content}\n") for s in history]
        else:
            text = store.get_summary(user_id=args.user)
            print_json({"user_id": args.user, "summary": text}) if args.json else print(text or "(no summary yet)")


def cmd_forget(args: argparse.Namespace) -> None:
    if not args.yes:
        raise ValidationError(f"forget deletes everything stored for {args.user!r}: add --yes to confirm")
    with open_store(args, embeddings=False) as store:
        counts = store.forget(user_id=args.user)
    print_json(counts) if args.json else print(f"forgot {args.user}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))


def cmd_users(args: argparse.Namespace) -> None:
    with open_store(args, embeddings=False, read_only=True) as store:
        users = store.list_users()
    print_json(users) if args.json else [print(f"{u['id']:<32} {u['items']:>7} items {u['facts']:>6} facts"
                                               + (f"  {u['timezone']}" if u["timezone"] else "")) for u in users]


def cmd_timezone(args: argparse.Namespace) -> None:
    if args.zone is not None and args.clear:
        raise ValidationError("give a time zone or --clear, not both")
    with open_store(args, embeddings=False, read_only=args.zone is None and not args.clear) as store:
        if args.zone is not None or args.clear:
            zone = store.set_user_timezone(args.zone, user_id=args.user)
        else:
            zone = store.user_timezone(user_id=args.user)
        default = store.settings.timezone
    if args.json:
        print_json({"user_id": args.user, "timezone": zone, "in_effect": zone or default})
    else:
        print(f"{args.user}: {zone}" if zone else f"{args.user}: none of its own (the store's {default})")


def cmd_memory(args: argparse.Namespace) -> None:
    with open_store(args, embeddings=False, read_only=args.state is None) as store:
        enabled = store.memory_enabled(user_id=args.user) if args.state is None \
            else store.set_memory_enabled(args.state == "on", user_id=args.user)
    if args.json:
        print_json({"user_id": args.user, "memory_enabled": enabled})
    else:
        print(f"{args.user}: memory {'on' if enabled else 'off (nothing new is stored)'}")


# -- embeddings, health, demo, bench ---------------------------------------------------------

def _embedding_job(args: argparse.Namespace, rebuild: bool) -> None:
    from ..progress import Progress

    with open_store(args) as store:
        if store.embedding_model is None:
            raise ValidationError("no embedding provider configured (set --embeddings, OLLAMA_HOST or install the local extra)")
        job = store.rebuild_embeddings if rebuild else store.backfill
        with Progress("rebuild" if rebuild else "backfill") as bar:
            report = job(user_id=args.user, batch_size=args.batch_size, progress=bar)
    print_json(report) if args.json else print(
        f"embedded {report.embedded}, failed {report.failed}, still without a vector {report.remaining}")


def cmd_backfill(args: argparse.Namespace) -> None:
    _embedding_job(args, rebuild=False)


def cmd_rebuild(args: argparse.Namespace) -> None:
    if not args.yes:
        raise ValidationError("rebuild-embeddings re-embeds every row: add --yes to confirm")
    _embedding_job(args, rebuild=True)


def _yes(found: bool) -> str:
    return "installed" if found else "missing"


def doctor_lines(report: dict[str, Any]) -> list[str]:
    """The doctor's report as aligned lines a person reads top to bottom."""
    from .. import __version__

    rows = [("navi-memory", __version__), ("database", report["database"])]
    if "schema" in report:
        rows.append(("schema", report["schema"]))
    if "schema_version" in report:
        rows.append(("schema version", str(report["schema_version"])))
    rows.append(("embeddings", f"{report['embedding_model'] or 'none (lexical search only)'}"
                               f" (setting: {report['embeddings_setting'] or 'auto'})"
                 if "embedding_model" in report else f"setting: {report['embeddings_setting'] or 'auto'}"))
    counts = report.get("embeddings")
    if counts:
        rows.append(("vectors", f"{counts['items']} items: {counts['ready']} ready, {counts['pending']} pending, "
                                f"{counts['error']} failed, "
                                + (f"{counts['skipped']} not embedded by choice (embed=False), "
                                   if counts.get("skipped") else "")
                                + f"{counts['other_model']} of another model, "
                                f"{counts['missing']} missing"))
        if counts["pending"] or counts["error"] or counts["other_model"] or counts["missing"]:
            rows.append(("", "run `navi-memory backfill` to embed them"))
    if "embedder_reachable" in report:
        rows.append(("embedder", "reachable" if report["embedder_reachable"]
                     else f"NOT reachable: {report.get('embedder_error')}"))
    if report.get("passage_chars") is not None:
        rows.append(("long texts", f"over {report['passage_chars']} characters: the mean of their passages"
                     if report["passage_chars"] else "embedded whole (the model reads what fits its window)"))
    if "reranker" in report:
        rows.append(("reranker", "off" if report["reranker"] is None else _reranker_line(report["reranker"])))
    rows.append(("ollama host", report["ollama_host"] or "not set"))
    rows.append(("chat model", report.get("chat_model") or "none (rules only: explicit statements)"))
    for key, name in (("embedding_url", "embeddings url"), ("chat_url", "chat url")):
        if report.get(key):
            rows.append((name, report[key]))
    rows.append(("extras", ", ".join(f"{name} {_yes(found)}" for name, found in report["extras"].items())))
    width = max(len(key) for key, _ in rows) + 2
    return [f"{key:<{width}}{value}" for key, value in rows]


def _reranker_line(reranker: dict[str, Any]) -> str:
    """``onnx:F (reads the best 8, the rest of 20 when none scores 2; weight 0.5)``."""
    reach = (f"the best {reranker['first']}, the rest of {reranker['depth']} when none scores {reranker['enough']:g}"
             if reranker.get("first") is not None else f"the best {reranker['depth']}")
    return f"{reranker['name']} (reads {reach}; weight {reranker['weight']:g})"


def cmd_doctor(args: argparse.Namespace) -> None:
    settings = Settings.from_env()
    report: dict[str, Any] = {"database": str(parse_url(args.db or settings.url)),
                              "embeddings_setting": args.embeddings or settings.embeddings,
                              "ollama_host": settings.ollama_host, "chat_model": settings.chat_model,
                              "embedding_url": settings.embedding_url and mask_password(settings.embedding_url),
                              "chat_url": settings.chat_url and mask_password(settings.chat_url), "extras": {}}
    for extra, module in (("postgres", "psycopg"), ("ollama", "langchain_ollama"), ("local", "sentence_transformers"),
                          ("langchain", "langchain_core"), ("llamaindex", "llama_index.core"), ("ui", "starlette"),
                          ("cli", "tqdm"), ("mcp", "mcp"), ("fast", "usearch"), ("rerank", "onnxruntime")):
        try:
            report["extras"][extra] = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            report["extras"][extra] = False
    try:
        store = open_store(args, read_only=True)
    except SchemaError as exc:  # the report so far, then the one-line error and exit 2
        if exc.empty:  # a fresh machine: nothing to be wrong yet
            report["schema"] = "none yet: nothing is stored (the first write, or navi-memory migrate, creates it)"
            if args.json:
                print_json(report)
            else:
                print("\n".join(doctor_lines(report)))
            return
        report["schema"] = str(exc)
        if args.json:
            print_json(report)
        else:  # the error itself follows on stderr: said once
            print("\n".join(doctor_lines({**report, "schema": "not usable (the error below)"})))
        raise
    with store:
        report["schema_version"] = store.backend.schema_version()
        report["embedding_model"] = store.embedding_model
        report["embeddings"] = store.embedding_status()
        # NAVI_MEMORY_RERANKER: a bad one already failed the open, saying why
        report["reranker"] = None if store.reranker is None else store.reranker.to_dict()
        if store.embedder is not None:
            report["passage_chars"] = store.embedder.passage_chars
            try:
                store.embedder.embed_query("navi-memory doctor")
                report["embedder_reachable"] = True
            except NaviMemoryError as exc:
                report["embedder_reachable"] = False
                report["embedder_error"] = str(exc)
    print_json(report) if args.json else print("\n".join(doctor_lines(report)))


def cmd_demo(args: argparse.Namespace) -> None:
    from ..demo import run_demo
    from ..store import MemoryStore

    db = args.db or f"sqlite:///{tempfile.mkdtemp(prefix='navi-memory-demo-')}/demo.db"
    with MemoryStore.open(db, args.embeddings) as store:
        print(f"navi-memory demo — database {parse_url(db)}")
        run_demo(store, sys.stdout, db=str(parse_url(db)))


def cmd_bench(args: argparse.Namespace) -> None:
    args.bench_run(args)


# -- parser ----------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    def common(parser: argparse.ArgumentParser, suppress: bool) -> argparse.ArgumentParser:
        def default(value: Any) -> Any:
            return argparse.SUPPRESS if suppress else value

        parser.add_argument("--db", default=default(os.environ.get("NAVI_MEMORY_URL")),
                            help="database URL (sqlite:///file.db or postgresql://...); "
                                 "default $NAVI_MEMORY_URL or a file in your data dir")
        parser.add_argument("--embeddings", default=default(None),
                            help="embedding provider: auto, ollama, local, hashing, none "
                                 "(default $NAVI_MEMORY_EMBEDDINGS or auto)")
        parser.add_argument("-v", "--verbose", action="store_true", default=default(False), help="log debug information")
        return parser

    parser = common(argparse.ArgumentParser(prog="navi-memory", description="Long-term memory of users for LLM assistants."), False)
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"navi-memory {__version__}",
                        help="print the version and exit")
    # the global options are accepted after the command too
    shared = common(argparse.ArgumentParser(add_help=False), True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, fn: Callable[[argparse.Namespace], None], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, parents=[shared])
        p.set_defaults(func=fn)
        return p

    command("migrate", cmd_migrate, "create or upgrade the schema (safe to re-run)")
    p = command("add", cmd_add, "store a note for a user")
    user_option(p); json_option(p)
    p.add_argument("content", help="the text to remember")
    p.add_argument("--type", default="note", choices=ITEM_TYPES, help="kind of item (default note)")
    p.add_argument("--theme", help="theme slug (default: guessed from the text, else general)")
    p.add_argument("--title", help="short title")
    p.add_argument("--tag", action="append", help="a tag (repeatable)")
    p.add_argument("--pin", action="store_true", help="pin it: always part of the memory block")
    p.add_argument("--expires-days", type=float, help="forget it after this many days")
    p.add_argument("--allow-duplicate", action="store_true",
                   help="store it even when the user already has a note with the same text (default: keep that one)")
    for name, fn, text in (("get", cmd_get, "show one item"), ("pin", cmd_pin, "pin an item"),
                           ("archive", cmd_archive, "archive an item"), ("delete", cmd_delete, "delete an item"),
                           ("update", cmd_update, "change an item (re-embeds new text)")):
        p = command(name, fn, text)
        user_option(p)
        p.add_argument("id", type=integer("id"), help="item id (see `list`)")
        if name in ("get", "update"):
            json_option(p)
    sub.choices["pin"].add_argument("--off", action="store_true", help="unpin")
    sub.choices["archive"].add_argument("--restore", action="store_true", help="make active again")
    for flag, text in (("--content", "new text (re-embedded)"), ("--title", "new title"), ("--theme", "new theme")):
        sub.choices["update"].add_argument(flag, help=text)
    sub.choices["update"].add_argument("--type", choices=ITEM_TYPES, help="new kind of item")
    p = command("list", cmd_list, "list items, newest first")
    user_option(p); json_option(p)
    p.add_argument("--theme", help="only this theme")
    p.add_argument("--type", action="append", choices=ITEM_TYPES, help="only this kind (repeatable)")
    p.add_argument("--status", default="active", choices=SEARCH_STATUSES, help="item status (default active)")
    p.add_argument("--limit", type=integer("limit"), default=50, help="items listed (default 50)")
    p.add_argument("--offset", type=integer("offset"), default=0, help="skip this many first (paging)")
    p = command("search", cmd_search, "hybrid search over a user's memory")
    user_option(p); json_option(p)
    p.add_argument("query", help="what to look for, in plain words")
    p.add_argument("--limit", type=integer("limit"), default=10, help="results at most (default 10)")
    p.add_argument("--theme", help="only this theme")
    p.add_argument("--type", action="append", choices=ITEM_TYPES, help="only this kind (repeatable)")
    p.add_argument("--status", default="active", choices=SEARCH_STATUSES, help="item status (default active)")
    p.add_argument("--recency-days", type=float, help="only items from the last N days")
    p.add_argument("--fusion", choices=FUSIONS, help="how semantic and lexical scores combine (default: the store's)")
    p.add_argument("--timezone", help="the IANA zone of the query's days (default: the user's, else the store's)")
    p.add_argument("--min-score", type=float, default=None,
                   help="relevance floor from 0 to 1 (default: the store's, NAVI_MEMORY_MIN_SCORE, 0.25; 0 = off)")
    from . import themes as cli_themes

    cli_themes.add_commands(command)  # themes, theme

    p = command("fact", cmd_fact, "structured facts: set, get, list, delete")
    facts = p.add_subparsers(dest="fact_command", required=True, metavar="ACTION")
    f = facts.add_parser("set", help="insert or update a fact", description="insert or update a fact",
                         parents=[shared])
    f.add_argument("key", help="short snake_case name, e.g. coffee_order")
    f.add_argument("value", help="the value, e.g. 'flat white'")
    f.add_argument("--category", required=True, choices=FACT_CATEGORIES, help="fact category")
    f.add_argument("--source", default="user_explicit", choices=FACT_SOURCES,
                   help="where it came from (default user_explicit)")
    f.add_argument("--confidence", type=integer("confidence"), help="0-100 (default: by source)")
    f.add_argument("--expires-days", type=float, help="forget it after this many days")
    f.add_argument("--context", help="where the fact came from")
    f.add_argument("--observed-at", metavar="WHEN",
                   help="when it was said, ISO 8601 (e.g. 2026-10-01 or 2026-10-01T09:00+02:00; default now): "
                        "a value said before the current one goes into the history")
    f = facts.add_parser("get", help="show a fact and its history", description="show a fact and its history",
                         parents=[shared])
    f.add_argument("key", nargs="+", metavar="[CATEGORY] KEY",
                   help="the fact's key, after its category when given (as `fact get profile city`)")
    f.add_argument("--category", choices=FACT_CATEGORIES, help="the fact's category (when the key is in several)")
    f = facts.add_parser("list", help="list facts (also `navi-memory facts`)", description="list a user's facts",
                         parents=[shared])
    fact_list_options(f)
    f = facts.add_parser("delete", help="delete a fact by key", description="delete a fact by key", parents=[shared])
    f.add_argument("key", nargs="+", metavar="[CATEGORY] KEY", help="the fact's key, after its category when given")
    f.add_argument("--category", choices=FACT_CATEGORIES, help="only in this category")
    for f in facts.choices.values():
        user_option(f); json_option(f)
    p = command("facts", cmd_fact_list, "list a user's facts (the same as `fact list`)")
    user_option(p); json_option(p)
    fact_list_options(p)

    p = command("summary", cmd_summary, "show (or set) a user's narrative summary")
    user_option(p); json_option(p)
    p.add_argument("--set", metavar="TEXT", help="store a new summary version")
    p.add_argument("--history", action="store_true", help="show earlier versions")
    p = command("forget", cmd_forget, "delete everything stored for a user")
    user_option(p); json_option(p)
    p.add_argument("--yes", action="store_true", help="confirm")
    p = command("users", cmd_users, "list users (admin)")
    json_option(p)
    p = command("timezone", cmd_timezone, "show or set a user's time zone (whose days 'yesterday' in a query means)")
    user_option(p); json_option(p)
    p.add_argument("zone", nargs="?", help="an IANA name such as Europe/Lisbon (omit to show the current one)")
    p.add_argument("--clear", action="store_true", help="drop the user's own zone: the store's applies again")
    p = command("memory", cmd_memory, "show, or turn off or on, a user's memory (off: nothing new is stored)")
    user_option(p); json_option(p)
    p.add_argument("state", nargs="?", choices=("on", "off"), help="omit to show the current state")
    from .pipeline import add_commands

    add_commands(command)  # ingest, extract, stats, sessions
    from . import io as cli_io
    from . import mcp as cli_mcp
    from . import persons as cli_persons
    from . import reembed as cli_reembed
    from . import web as cli_ui

    cli_ui.add_commands(command)  # ui, serve
    cli_mcp.add_commands(command)  # mcp
    cli_persons.add_commands(command)  # person, household, promote, memory-md
    cli_reembed.add_commands(command)  # reembed
    cli_io.add_commands(command)  # export (JSON Lines, --format markdown), import (and --from-navi)
    for name, fn, text in (("backfill", cmd_backfill, "embed rows that have no vector of the active model"),
                           ("rebuild-embeddings", cmd_rebuild, "re-embed every row (semantic search waits for it; reembed does not)")):
        p = command(name, fn, text)
        user_option(p, required=False)
        json_option(p)
        p.add_argument("--batch-size", type=integer("batch_size"), default=32,
                       help="texts per embedding call (default 32)")
        if name == "rebuild-embeddings":
            p.add_argument("--yes", action="store_true", help="confirm")
    p = command("doctor", cmd_doctor, "show what is configured and reachable")
    json_option(p)
    command("demo", cmd_demo, "ingest a sample conversation and show search and the memory block")
    p = command("bench", cmd_bench, "benchmarks")
    benches = p.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    b = benches.add_parser("latency", help="ingest rate and search latency vs N")
    from ..bench import latency

    latency.add_arguments(b)
    b.set_defaults(bench_run=latency.run)
    b = benches.add_parser("locomo", help="retrieval quality on the LoCoMo benchmark")
    from ..bench import locomo

    locomo.add_arguments(b)
    b.set_defaults(bench_run=locomo.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    bad = next((value for value in vars(args).values() if isinstance(value, BadArgument)), None)
    if bad is not None:
        print(f"navi-memory: error: {bad.error}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="navi-memory: %(levelname)s: %(message)s")
    try:
        args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
    except NaviMemoryError as exc:
        print(f"navi-memory: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader left (`| head`): stop quietly, as programs killed by SIGPIPE do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return 141
    return 0
