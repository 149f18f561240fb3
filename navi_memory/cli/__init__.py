"""The ``navi-memory`` command line: ``main`` parses and dispatches (``cli.main``), the command
modules add their subcommands (``io``: export/import, ``persons``: household and promotion,
``pipeline``: conversations, ``web``: ui/serve/token, ``mcp``: the MCP server), and all of them share
``common``. Nothing here imports back up: ``main`` imports the command modules, they import ``common`` only.
Exit codes: 0 success, 2 bad input or a navi-memory error (one line on stderr)."""

from .. import bench  # noqa: F401  # first, before numpy loads OpenBLAS: its idle threads sleep at once
from .main import build_parser, main

__all__ = ["build_parser", "main"]
