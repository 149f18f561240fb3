"""What every command module of ``navi-memory`` shares: opening the store, integer options that
fail as one line, the ``--user`` and ``--json`` options, JSON output."""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable

from ..errors import ValidationError

# ``build_parser``'s helper that each command module's ``add_commands`` is given:
# (name, handler of the parsed arguments, help) -> the command's parser
AddCommand = Callable[[str, Callable[[argparse.Namespace], None], str], argparse.ArgumentParser]


class BadArgument:
    """An integer option that did not parse: kept by argparse, reported by ``main`` as one line
    (argparse's own error would print the usage and echo a 5,000-digit value back)."""

    def __init__(self, error: ValidationError) -> None:
        self.error = error


def integer(field: str) -> Callable[[str], "int | BadArgument"]:
    """The argparse ``type`` of every integer argument: ``validation.integer_text``."""
    from ..core import validation

    def parse(raw: str) -> "int | BadArgument":
        try:
            return validation.integer_text(raw, field)
        except ValidationError as exc:
            return BadArgument(exc)

    parse.__name__ = field
    return parse


def one_line(text: str, width: int) -> str:
    """``text`` on one line of at most ``width`` characters: a table row never breaks (newlines and
    runs of blanks become one space; a cut text ends with an ellipsis)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"


def score(value: float) -> str:
    """A score as printed: 3 decimals, 6 wide, and never ``-0.000`` (a tiny negative rounds to 0)."""
    return f"{round(value, 3) + 0.0:6.3f}"


def print_json(value: Any) -> None:
    def default(obj: Any) -> Any:
        if hasattr(obj, "to_dict"):
            return obj.to_dict()
        if hasattr(obj, "isoformat"):
            return obj.isoformat()
        raise TypeError(f"not JSON serialisable: {type(obj).__name__}")

    if isinstance(value, list):
        value = [v.to_dict() if hasattr(v, "to_dict") else v for v in value]
    elif hasattr(value, "to_dict"):
        value = value.to_dict()
    print(json.dumps(value, default=default, ensure_ascii=False, indent=2))


def open_store(args: argparse.Namespace, embeddings: Any = None, read_only: bool = False) -> Any:
    """The store of ``--db``. ``read_only`` (commands that only read): a database without the
    schema is an error (exit 2), and nothing is created."""
    from ..store import MemoryStore

    return MemoryStore.open(args.db, embeddings if embeddings is not None else args.embeddings, read_only=read_only)


# -- item commands -------------------------------------------------------------------------

def user_option(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--user", required=required, help="user id the command acts for")


def json_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
