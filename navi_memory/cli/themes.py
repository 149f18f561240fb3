"""The theme commands of ``navi-memory``: ``themes`` lists a user's themes, ``theme`` shows one or
names and describes it (the description is what the agent reads with the theme hints)."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from ..core import validation as v
from ..errors import NotFoundError
from ..models import Theme
from .common import json_option, one_line, open_store, print_json, user_option


def _line(theme: Theme) -> str:
    about = f"  {one_line(theme.description, 70)}" if theme.description else ""
    return f"{theme.slug:<24} {theme.active_count:>6}{about}"


def cmd_themes(args: argparse.Namespace) -> None:
    with open_store(args, embeddings=False, read_only=True) as store:
        themes = store.list_themes(user_id=args.user)
    if args.json:
        print_json(themes)
        return
    for theme in themes:
        print(_line(theme))


def cmd_theme(args: argparse.Namespace) -> None:
    changes: dict[str, Any] = {name: getattr(args, name) for name in ("display_name", "description")
                               if getattr(args, name) is not None}
    with open_store(args, embeddings=False, read_only=not changes) as store:
        if changes:
            theme = store.set_theme(args.slug, user_id=args.user, **changes)
        else:
            slug = v.slug(args.slug)
            theme = next((t for t in store.list_themes(user_id=args.user) if t.slug == slug), None)
            if theme is None:
                raise NotFoundError(f"{args.user} has no theme {slug!r} (give --name or --description to create it)")
    if args.json:
        print_json(theme)
        return
    print(f"{theme.slug} ({theme.display_name}): {theme.active_count} active items")
    if theme.description:
        print(theme.description)


Command = Callable[[argparse.Namespace], None]


def add_commands(command: Callable[[str, Command, str], argparse.ArgumentParser]) -> None:
    """Register the commands on the main parser (``command`` is ``build_parser``'s helper)."""
    p = command("themes", cmd_themes, "themes with active item counts and descriptions")
    user_option(p); json_option(p)
    p = command("theme", cmd_theme, "show a theme, or name and describe it (the agent sees the description with "
                                    "the theme hints)")
    user_option(p); json_option(p)
    p.add_argument("slug", metavar="THEME", help="theme slug or name, e.g. travel")
    p.add_argument("--name", dest="display_name", help="display name, e.g. 'Travel'")
    p.add_argument("--description", help="what belongs under the theme ('' clears it)")
