"""The household and promotion commands of ``navi-memory``: person, household, promote, memory-md.

``navi-memory person add|list|resolve|update|remove|mode|speaker`` manage a user's persons;
``household`` shows the household or sets its name and locale;
``promote`` runs the promotion job (schedule it daily: see docs/concepts.md); ``memory-md``
writes the user's facts and pinned notes as a MEMORY.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..core import validation as v
from ..errors import NotFoundError, ValidationError
from ..models import HOUSEHOLD_MODES
from ..core.persons import ROLES, Person
from .common import AddCommand, integer, json_option, open_store, print_json, user_option


def _line(p: Person) -> str:
    extra = [f"role {p.role}"] if p.role else []
    extra += [f"aliases {', '.join(p.aliases)}"] if p.aliases else []
    extra += [p.pronouns] if p.pronouns else []
    extra += [f"born {p.birth_date}"] if p.birth_date else []
    extra += [f"devices {', '.join(p.devices)}"] if p.devices else []
    return f"{p.id:>4}  {p.display_name}" + (f"  ({'; '.join(extra)})" if extra else "")


def _fields(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("role", "pronouns", "birth_date", "notes"):
        if getattr(args, name) is not None:
            out[name] = getattr(args, name)
    if args.alias is not None:
        out["aliases"] = args.alias
    if args.device is not None:
        out["devices"] = args.device
    return out


def _ref(value: str) -> int | str:
    """A person id (ASCII digits, checked by ``validation.integer_text``) or a name, alias or role."""
    return v.integer_text(value, "person id") if value.isascii() and value.isdigit() else value


def cmd_person(args: argparse.Namespace) -> None:
    action = args.person_command
    with open_store(args, embeddings=False) as store:
        uid = args.user
        if action == "add":
            if args.multi:
                store.set_household_mode("multi", user_id=uid)
            result: Any = store.add_person(args.name, user_id=uid, **_fields(args))
        elif action == "list":
            result = store.list_persons(user_id=uid)
        elif action == "resolve":
            result = store.resolve_person_ref(args.ref, user_id=uid)
            if result is None and not args.json:
                raise NotFoundError(f"{args.ref!r} names no single person of {uid} (unknown or ambiguous)")
        elif action == "update":
            changes = _fields(args)
            if args.name is not None:
                changes["display_name"] = args.name
            result = store.update_person(_ref(args.ref), user_id=uid, **changes)
        elif action == "remove":
            result = store.remove_person(_ref(args.ref), user_id=uid)
        elif action == "mode":
            result = {"mode": store.set_household_mode(args.mode, user_id=uid) if args.mode
                      else store.household_mode(user_id=uid)}
        else:
            result = store.infer_speaker(args.text, user_id=uid, hint=_ref(args.hint) if args.hint else None,
                                         device=args.device)
    if args.json:
        print_json(result)
    elif isinstance(result, list):
        for p in result:
            print(_line(p))
    elif isinstance(result, Person):
        print(("removed " if action == "remove" else "") + _line(result))
    elif action == "mode":
        print(f"{uid}: {result['mode']} mode")
    else:
        who = result.speaker.display_name if result.speaker else "unknown"
        print(f"speaker {who} ({result.confidence}: {result.reason}); hints: {', '.join(result.hints) or '-'}")


def cmd_household(args: argparse.Namespace) -> None:
    details = {name: getattr(args, name) for name in ("display_name", "locale") if getattr(args, name) is not None}
    with open_store(args, embeddings=False, read_only=not details) as store:
        household = store.put_household(user_id=args.user, **details) if details \
            else store.household(user_id=args.user)
    if args.json:
        print_json(household)
        return
    zone = household["timezone"] or "the store's"
    about = [f"{household['mode']} mode", f"locale {household['locale'] or 'not set'}", f"time zone {zone}"]
    print(f"{args.user}: {household['display_name'] or '(no name)'} ({'; '.join(about)})")
    for p in household["persons"]:
        print(_line(p))


def cmd_promote(args: argparse.Namespace) -> None:
    from ..progress import Progress

    with open_store(args) as store, Progress("promote", unit="users") as bar:
        report = store.promote(user_id=args.user, all_users=args.user is None, max_items=args.max_items,
                               progress=bar)
    if args.json:
        print_json(report)
        return
    print(f"{report.users} user(s), {report.candidates} items read: {report.clusters} clusters, "
          f"{report.facts_added} facts added, {report.facts_updated} updated, {report.items_promoted} items promoted")


def cmd_memory_md(args: argparse.Namespace) -> None:
    with open_store(args, embeddings=False, read_only=True) as store:
        text = store.memory_markdown(user_id=args.user, limit=args.limit)
    if args.output in (None, "-"):
        sys.stdout.write(text)
        return
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"cannot write {args.output}: {exc.strerror or exc}") from exc


def _globals(p: argparse.ArgumentParser) -> None:
    """The global options, accepted after a person action too (as after any command)."""
    p.add_argument("--db", default=argparse.SUPPRESS, help="database URL")
    p.add_argument("--embeddings", default=argparse.SUPPRESS, help="embedding provider")
    p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log debug information")


def _person_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--alias", action="append", help="another name the person answers to (repeatable)")
    p.add_argument("--role", help=f"e.g. {', '.join(ROLES[:5])}, ...")
    p.add_argument("--pronouns", help="e.g. she/her")
    p.add_argument("--birth-date", metavar="YYYY-MM-DD", help="date of birth")
    p.add_argument("--notes", help="free text about the person")
    p.add_argument("--device", action="append", help="id of a device the person uses, e.g. kitchen-speaker (repeatable;"
                                                     " a turn from it is theirs)")


def add_commands(command: AddCommand) -> None:
    """Register the commands on the main parser (``command`` is ``build_parser``'s helper)."""
    p = command("person", cmd_person, "the persons of a user's household: add, list, resolve, update, remove, "
                                      "mode, speaker")
    actions = p.add_subparsers(dest="person_command", required=True, metavar="ACTION")

    def action(name: str, text: str) -> argparse.ArgumentParser:
        a = actions.add_parser(name, help=text, description=text)
        _globals(a); user_option(a); json_option(a)
        return a

    a = action("add", "add a person (a second person needs multi mode: --multi switches to it)")
    a.add_argument("name", metavar="NAME", help="display name")
    _person_options(a)
    a.add_argument("--multi", action="store_true", help="switch the household to multi mode first")
    action("list", "list the persons")
    a = action("resolve", "the person a name, alias or role refers to (null when unknown or ambiguous)")
    a.add_argument("ref", metavar="REF", help="a name, alias or role, e.g. 'my wife'")
    a = action("update", "change a person")
    a.add_argument("ref", metavar="REF", help="id, name, alias or role")
    a.add_argument("--name", help="new display name")
    _person_options(a)
    a = action("remove", "remove a person (their items and facts keep the name)")
    a.add_argument("ref", metavar="REF", help="id, name, alias or role")
    a = action("mode", "show or switch the household mode (multi -> single needs one person at most)")
    a.add_argument("mode", nargs="?", choices=HOUSEHOLD_MODES, help="the mode to switch to (omit to show it)")
    a = action("speaker", "who is speaking in a turn, and the person hints for search")
    a.add_argument("text", metavar="TEXT", help="what was said")
    a.add_argument("--hint", help="the person of the session (id, name or alias)")
    a.add_argument("--device", help="the device the turn comes from (its person speaks)")
    p = command("household", cmd_household, "show the household, or set its name and locale (shown in the prompt "
                                            "and the UI)")
    user_option(p); json_option(p)
    p.add_argument("--name", dest="display_name", help="the household's name, e.g. 'The Millers' ('' clears it)")
    p.add_argument("--locale", help="a language tag, e.g. en-US ('' clears it)")
    p = command("promote", cmd_promote, "turn repeated notes into facts (all users unless --user); idempotent")
    user_option(p, required=False); json_option(p)
    p.add_argument("--max-items", type=integer("max_items"), default=5000, help="newest items read per user")
    p = command("memory-md", cmd_memory_md, "write a user's facts and pinned notes as a MEMORY.md")
    user_option(p)
    p.add_argument("--output", "-o", help="file to write (default: standard output)")
    p.add_argument("--limit", type=integer("limit"), default=100, help="facts at most (default 100; promoted first)")
