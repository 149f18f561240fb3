"""The web commands of ``navi-memory``: ``ui`` (read-only browser), ``serve`` (REST API with writes)
and ``token`` (a user's bearer token in a token file, for ``serve`` / ``ui`` / ``mcp --tokens``).

``ui`` and ``serve`` need the ``ui`` extra, imported only when a command runs. Their tokens come
from ``--token`` or the environment (better: the environment keeps them out of the process list)
and are never printed; ``token`` prints only the token it makes (on stdout, for scripts).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from typing import Any, Callable

from ..errors import ConfigurationError, ValidationError
from .common import AddCommand, integer

UI_TOKEN_ENV, API_TOKEN_ENV = "NAVI_MEMORY_UI_TOKEN", "NAVI_MEMORY_API_TOKEN"
API_TOKENS_ENV = "NAVI_MEMORY_API_TOKENS"  # a JSON file {"<token>": "<user id>"}: tokens that act for one user
UI_TOKENS_ENV = "NAVI_MEMORY_UI_TOKENS"  # the same for the browser: each user sees their own pages


def _require_ui() -> None:
    for module in ("starlette", "jinja2", "uvicorn"):
        if importlib.util.find_spec(module) is None:
            raise ConfigurationError("the web UI needs the 'ui' extra: pip install 'navi-memory[ui]'")


def _serve(args: argparse.Namespace, make_app: Callable[[Any], Any], what: str, token_hint: str | None,
           read_only: bool = False) -> None:
    import uvicorn

    from ..store import MemoryStore
    from ..ui.serving import header_timeout_protocol

    # the REST API extracts memory from the conversations it records: the chat model of the
    # environment (NAVI_MEMORY_CHAT_MODEL), if any; the read-only browser needs none
    store = MemoryStore.open(args.db, args.embeddings, chat_model=False if read_only else None, read_only=read_only)
    try:
        app = make_app(store)
        shown = f"[{args.host}]" if ":" in args.host else args.host
        hint = f" (token required: {token_hint})" if token_hint else ""
        print(f"navi-memory {what} on http://{shown}:{args.port}/{hint}", flush=True)
        uvicorn.run(app, host=args.host, port=args.port, log_level="debug" if args.verbose else "warning",
                    server_header=False, http=header_timeout_protocol())
    finally:
        store.close()


def _token_map(path: str | None) -> Any:
    from ..tokens import TokenMap

    return None if path is None else TokenMap.load(path)


def cmd_ui(args: argparse.Namespace) -> None:
    _require_ui()
    from ..ui.app import create_app
    from ..ui.security import check_token

    tokens = _token_map(args.tokens or os.environ.get(UI_TOKENS_ENV) or None)
    token = args.token or os.environ.get(UI_TOKEN_ENV) or None
    if tokens is None or token:  # per-user tokens alone guard every page too
        token = check_token(token, args.host, UI_TOKEN_ENV)
    _serve(args, lambda store: create_app(store, token=token, host=args.host, tokens=tokens),
           "memory browser (read-only)",
           (token or tokens) and "open the address with ?token=... once, or send Authorization: Bearer", read_only=True)


def cmd_serve(args: argparse.Namespace) -> None:
    _require_ui()
    from ..ui.api import create_api_app
    from ..ui.security import check_token

    tokens = _token_map(args.tokens or os.environ.get(API_TOKENS_ENV) or None)
    token = args.token or os.environ.get(API_TOKEN_ENV) or None
    if tokens is None or token:  # per-user tokens alone guard every route too
        token = check_token(token, args.host, API_TOKEN_ENV, required=True)
    _serve(args, lambda store: create_api_app(store, token=token, host=args.host, tokens=tokens), "REST API",
           "send Authorization: Bearer")


def cmd_token(args: argparse.Namespace) -> None:
    from ..tokens import issue_token, revoke_tokens

    if args.revoke and args.expires_days is not None:
        raise ValidationError("--expires-days makes a token: it does not go with --revoke")
    if args.revoke:
        print(f"removed {revoke_tokens(args.file, args.user)} token(s) of {args.user} from {args.file}"
              " (the servers that read it stop taking them within a second)")
    else:  # the token on stdout alone, for scripts; what to do with it on stderr
        print(issue_token(args.file, args.user, expires_days=args.expires_days))
        until = "" if args.expires_days is None else f", acting for {args.expires_days:g} days"
        print(f"a token for {args.user} added to {args.file} (mode 600{until}); the servers that read it"
              " (serve / ui / mcp --tokens) take it within a second", file=sys.stderr)


def add_commands(command: AddCommand) -> None:
    """Register ``ui``, ``serve`` and ``token`` on the main parser (``command`` is ``build_parser``'s helper)."""
    p = command("token", cmd_token, "make (or --revoke) a user's bearer token in a token file for serve/ui/mcp --tokens")
    p.add_argument("--user", required=True, help="the user the token acts for")
    p.add_argument("--file", required=True, metavar="FILE", help="the JSON token file (created, mode 600, if missing)")
    p.add_argument("--revoke", action="store_true", help="remove every token of the user instead")
    p.add_argument("--expires-days", type=float, metavar="DAYS", help="the token stops acting after this many days")
    for name, fn, text, port, env in (
            ("ui", cmd_ui, "read-only memory browser in a web page (needs the ui extra)", 8765, UI_TOKEN_ENV),
            ("serve", cmd_serve, "REST API with writes, always behind a token (needs the ui extra)", 8766,
             API_TOKEN_ENV)):
        p = command(name, fn, text)
        p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; "
                                                           "any other address needs a token)")
        p.add_argument("--port", type=integer("port"), default=port, help=f"port (default {port})")
        p.add_argument("--token", help=f"access token, at least 16 characters (default ${env})"
                       + "; with --tokens, the administrator's (every user)")
        p.add_argument("--tokens", metavar="FILE", help="JSON file mapping tokens to user ids, each token reaching "
                                                        "only its user's " + ("routes" if name == "serve" else "pages")
                                                        + f" (default ${API_TOKENS_ENV if name == 'serve' else UI_TOKENS_ENV})")
