"""``navi-memory mcp``: the memory as an MCP server (needs the ``mcp`` extra, imported only when it runs).

stdio (default): one user, ``--user``; an MCP client starts the command itself. ``--transport http``:
streamable HTTP at ``/mcp``, every request with a bearer token from ``--tokens`` (a JSON file
``{"<token>": "<user id>"}``), listening on 127.0.0.1 unless ``--host`` says otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import sys

from ..errors import ConfigurationError
from .common import AddCommand, integer, user_option

TOKENS_ENV = "NAVI_MEMORY_MCP_TOKENS"


def cmd_mcp(args: argparse.Namespace) -> None:
    if importlib.util.find_spec("mcp") is None:
        raise ConfigurationError("the MCP server needs the 'mcp' extra: pip install 'navi-memory[mcp]'")
    from ..integrations.mcp import serve

    if args.transport == "http":
        shown = f"[{args.host}]" if ":" in args.host else args.host
        print(f"navi-memory MCP server on http://{shown}:{args.port}/mcp (bearer token required)", file=sys.stderr,
              flush=True)
    asyncio.run(serve(args.db, embeddings=args.embeddings, transport=args.transport, user_id=args.user,
                      token_file=args.tokens or os.environ.get(TOKENS_ENV) or None, host=args.host,
                      port=args.port, log_level="debug" if args.verbose else "warning", agent_id=args.agent_id,
                      run_id=args.run_id))


def add_commands(command: AddCommand) -> None:
    """Register ``mcp`` on the main parser (``command`` is ``build_parser``'s helper)."""
    p = command("mcp", cmd_mcp, "serve the memory tools to MCP clients over stdio or HTTP (needs the mcp extra)")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                   help="stdio (default; one user, --user) or streamable HTTP (users from --tokens)")
    user_option(p, required=False)
    p.add_argument("--tokens", metavar="FILE", help=f"HTTP: JSON file mapping bearer tokens to user ids "
                                                    f"(default ${TOKENS_ENV})")
    p.add_argument("--host", default="127.0.0.1", help="HTTP: address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=integer("port"), default=8767, help="HTTP: port (default 8767)")
    p.add_argument("--agent-id", help="the agent the tools act for: notes and facts are saved with it, and search,"
                                      " get, archive and forget reach only what it wrote (default: no scope)")
    p.add_argument("--run-id", help="the run the tools act in, likewise (default: no scope)")
