"""The conversation-memory commands of ``navi-memory``: ingest, extract, stats, sessions.

They call the same store operations as applications do, always inline (a command's process ends
when it is done, so nothing is left to a background worker).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..core import validation as v
from ..errors import ExtractionError, ValidationError
from ..models import SESSION_STATES, ExtractionReport
from .common import AddCommand, integer, json_option, print_json, user_option


def open_store(args: argparse.Namespace, chat: bool = False, read_only: bool = False) -> Any:
    """The store; without an embedder for the read-only commands (they never embed, and resolving
    one costs a model load or a warning)."""
    from ..store import MemoryStore

    return MemoryStore.open(args.db, False if read_only else args.embeddings,
                            chat_model=getattr(args, "chat_model", None) if chat else False, read_only=read_only)


EXPECTED = ("a JSON list of messages ({\"role\": ..., \"content\": ...}), an object with \"messages\" (and "
            "\"session_id\"), JSON Lines of messages, or a navi-memory export (its message records)")
MESSAGE_FIELDS = ("role", "content", "name", "tool_calls", "tool_call_id", "created_at", "timestamp")


def _read_messages(source: str) -> list[tuple[Any, Any]]:
    """The conversations in ``source``: (session id or None, messages payload) each. A JSON
    document is one conversation; JSON Lines are one message a line, or an ``export``'s records,
    whose messages are taken session by session."""
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise ValidationError(f"cannot read {source}: {exc.strerror or exc}") from exc
    text = v.utf8_text(data, source)
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        payload = v.parse_json(text, source)
    except ValidationError:
        if len(lines) < 2:
            raise
        records = [v.parse_json(line, f"{source} line {n}") for n, line in enumerate(lines, 1)]
        return _conversations(records, source)
    if not isinstance(payload, (list, dict)):
        raise ValidationError(f"{source} holds no messages: expected {EXPECTED}")
    session = payload.get("session_id") if isinstance(payload, dict) else None
    return [(session, payload)]


def _conversations(records: list[Any], source: str) -> list[tuple[Any, Any]]:
    if not all(isinstance(r, dict) for r in records):
        raise ValidationError(f"{source}: every line of JSON Lines must be an object: expected {EXPECTED}")
    if records[0].get("format") != "navi-memory-export":
        return [(None, records)]
    sessions: dict[Any, list[dict[str, Any]]] = {}
    for record in records:
        if record.get("type") == "message":
            message = {k: record[k] for k in MESSAGE_FIELDS if record.get(k) not in (None, [])}
            sessions.setdefault(record.get("session_id"), []).append(message)
    if not sessions:
        raise ValidationError(f"{source} is a navi-memory export without messages: `navi-memory import` loads "
                              "the rest of an export")
    return list(sessions.items())


def report_line(report: ExtractionReport) -> str:
    head = f"{report.user_id}/{report.session_id}: {report.state}"
    if report.state == "skipped":
        return f"{head} ({report.reason})"
    if report.state == "error":
        kept = f"the rules recorded {report.added + report.updated} facts; " if report.changes else ""
        return f"{head}: {report.error} ({report.llm_calls} LLM calls; {kept}retried on the next run)"
    how = "LLM" if report.used_llm else ("rules, nothing for the LLM" if report.prefiltered else "rules")
    return (f"{head} by {how}: {report.added} added, {report.updated} updated, {report.unchanged} unchanged, "
            f"{report.notes} notes, {report.chunks} chunks, {report.llm_calls} LLM calls "
            f"({report.input_tokens} in / {report.output_tokens} out tokens)"
            + ("; summary updated" if report.summary_updated else ""))


def _finish(reports: list[ExtractionReport], as_json: bool) -> None:
    if as_json:
        print_json(reports)
    else:
        for report in reports:
            print(report_line(report))
    failed = [r for r in reports if r.state == "error"]
    if failed:
        raise ExtractionError(f"{len(failed)} of {len(reports)} session(s) failed; they are retried on the next run")


def _asks_to_remember(store: Any, session: str, user: str, added: int) -> bool:
    """Whether one of the user messages just stored says "remember that ..." (the trigger that
    extracts a live conversation at once)."""
    from ..pipeline.rules import asks_to_remember

    if not added:
        return False
    stored = store.get_session(session, user_id=user).messages[-added:]
    return any(m.role == "user" and asks_to_remember(m.content) for m in stored)


def cmd_ingest(args: argparse.Namespace) -> None:
    conversations = _read_messages(args.file)
    if args.session and len(conversations) > 1:
        raise ValidationError(f"{args.file} holds {len(conversations)} sessions: --session names one")
    with open_store(args, chat=True) as store:
        from ..pipeline.sessions import normalize_messages

        for number, (found, payload) in enumerate(conversations, 1):  # every session checked before one is stored
            try:
                normalize_messages(payload, store.settings.max_content_bytes)
            except ValidationError as exc:
                where = f"session {found}" if found is not None else f"conversation {number}"
                raise ValidationError(f"{args.file}, {where}: {exc} (nothing was stored)") from exc
        for found, payload in conversations:
            _ingest_one(args, store, args.session or found, payload)


def _ingest_one(args: argparse.Namespace, store: Any, session: Any, payload: Any) -> None:
    if session is None:
        import uuid

        session = uuid.uuid4().hex
    result = store.add_messages(session, payload, user_id=args.user, triggers=False)
    remember = not args.extract and _asks_to_remember(store, session, args.user, result.added)
    # a whole file is a finished conversation: "remember that ..." extracts it now, as it would live
    report = store.extract_session(session, user_id=args.user) if args.extract or remember else None
    if args.json and report is None:
        print_json(result)
    elif not args.json:
        head = f"stored {result.added} messages in session {session} for {args.user}"
        if report is None:
            import shlex

            command = f"navi-memory extract --user {shlex.quote(args.user)} --session {shlex.quote(str(session))}"
            print(f"{head} (run `{command}`, or `navi-memory extract` for every pending session, to process it)")
        else:
            print(head + ('; it asks to "remember" something: extracted now' if remember else ""))
    if report is not None:
        _finish([report], args.json)


def cmd_extract(args: argparse.Namespace) -> None:
    if args.session and not args.user:
        raise ValidationError("--session needs --user")
    with open_store(args, chat=True) as store:
        if args.session:
            reports = [store.extract_session(args.session, user_id=args.user, force=args.all_messages)]
        else:
            reports = store.process_stale_sessions(user_id=args.user, all_users=args.user is None,
                                                   stale_minutes=args.stale_minutes, limit=args.limit,
                                                   unextracted=not args.stale_only)
    if not reports and not args.json:
        print("no stale sessions" if args.stale_only else "no sessions to extract (none stale or never extracted)")
    _finish(reports, args.json)


def cmd_stats(args: argparse.Namespace) -> None:
    with open_store(args, read_only=True) as store:
        stats = store.usage_stats(user_id=args.user, all_users=args.user is None, limit=args.limit)
    if args.json:
        print_json(stats)
        return
    totals = stats["totals"]
    print(f"sessions {totals['sessions']}  messages {totals['messages']}  " + "  ".join(
        f"{state} {s['sessions']}" for state, s in sorted(stats["states"].items())))
    print(f"LLM calls {totals['llm_calls']} ({totals['failed_calls']} failed), tokens {totals['input_tokens']} in / "
          f"{totals['output_tokens']} out; extraction calls per extracted session "
          f"{totals['extraction_calls_per_extracted_session']}")
    for purpose, p in sorted(stats["purposes"].items()):
        print(f"  {purpose:<8} {p['calls']:>6} calls {p['input_tokens']:>9} in {p['output_tokens']:>8} out"
              f"  in {p['sessions']} sessions")
    for model, m in sorted(stats["models"].items()):
        print(f"  {model}: {m['calls']} calls ({m['failed']} failed), {m['input_tokens']} in, {m['output_tokens']} out")
    for s in stats["sessions"]:
        print(f"  {s['user_id']}/{s['session_id']:<34} {s['state']:<10} {s['message_count']:>5} messages"
              f" {s['llm_calls']:>3} LLM calls {s['input_tokens']:>8} in {s['output_tokens']:>7} out")


def cmd_sessions(args: argparse.Namespace) -> None:
    with open_store(args, read_only=True) as store:
        sessions = store.list_sessions(user_id=args.user, all_users=args.user is None, state=args.state,
                                       limit=args.limit)
    if args.json:
        print_json(sessions)
        return
    for s in sessions:
        active = f"{s.last_active:%Y-%m-%d %H:%M}" if s.last_active else "-"
        print(f"{s.user_id}/{s.session_id:<34} {s.state:<10} {s.message_count:>5} messages  last active {active}"
              + (f"  error: {s.error}" if s.error else ""))


def add_commands(command: AddCommand) -> None:
    """Register the commands on the main parser (``command`` is ``build_parser``'s helper)."""
    p = command("ingest", cmd_ingest, "store a conversation: a JSON list of OpenAI/LangChain-style messages, "
                                      "JSON Lines of them, or the messages of an export")
    user_option(p); json_option(p)
    p.add_argument("file", metavar="FILE", help="JSON or JSON Lines file, or - for standard input")
    p.add_argument("--session", help="session id (default: the file's session_id, else a new id)")
    p.add_argument("--extract", action="store_true",
                   help="extract facts from it right away (done anyway when it says \"remember that ...\")")
    p.add_argument("--chat-model", help="chat model for the extraction (default $NAVI_MEMORY_CHAT_MODEL; none: rules)")
    p = command("extract", cmd_extract, "process stale and never-extracted sessions (or one session): facts, notes,"
                                        " chunks, summary")
    user_option(p, required=False); json_option(p)
    p.add_argument("--session", help="extract this session now, stale or not (needs --user)")
    p.add_argument("--all-messages", action="store_true", help="with --session: re-read the whole session")
    p.add_argument("--stale-minutes", type=float, help="idle time that makes a session stale (default 30)")
    p.add_argument("--stale-only", action="store_true",
                   help="only stale sessions: leave never-extracted ones active in the last --stale-minutes")
    p.add_argument("--limit", type=integer("limit"), default=100, help="at most this many sessions")
    p.add_argument("--chat-model", help="chat model (default $NAVI_MEMORY_CHAT_MODEL; none: rules only)")
    p = command("stats", cmd_stats, "sessions, LLM calls and tokens (per purpose and per session)")
    user_option(p, required=False); json_option(p)
    p.add_argument("--limit", type=integer("limit"), default=20, help="sessions listed")
    p = command("sessions", cmd_sessions, "sessions, most recently active first")
    user_option(p, required=False); json_option(p)
    p.add_argument("--state", choices=SESSION_STATES, help="only sessions in this extraction state")
    p.add_argument("--limit", type=integer("limit"), default=50, help="sessions listed (default 50)")
