"""The memory as an MCP server (the ``mcp`` extra): ``navi-memory mcp`` runs it over stdio or HTTP.

Tools: the ones ``MemoryTools`` defines for every framework (``memory_search``, ``memory_add_note``,
``memory_save_fact``, ``memory_get``, ``memory_archive``, ``memory_forget``, ``memory_list_themes``
and, in a multi-person household, ``memory_find_person``), with the same schemas, outputs and
error texts. Each declares an ``outputSchema`` and returns its JSON as structured content too
(MCP 2025-06-18); an error result is text only, flagged ``isError``. Resource:
``navi-memory://summary``, the user's narrative summary.

The user is never a tool argument. Over stdio it is the one the server was started for
(``--user``); over streamable HTTP it is the one the request's bearer token maps to in the token
file, and a request without a known token is refused (401) before MCP sees it. The SDK binds each
HTTP session to the token that opened it, so one user's session id is useless with another's token.
A server started for an agent or a run (``agent_id`` / ``run_id``, ``--agent-id`` / ``--run-id``)
keeps every tool to that scope, as ``MemoryTools`` does: its writes carry it, and search, get,
archive, forget and the themes listed reach only what was written in it. The summary and household
resources stay the user's: the narrative summary is written from all of the user's facts (as the
summary a scoped ``MemoryContextBuilder`` injects).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.shared.exceptions import MCPError

from .. import __version__, prompt
from ..core import validation as v
from ..errors import ConfigurationError, NaviMemoryError, ValidationError
from ..tokens import TokenMap
from ._caller import StoreCaller, store_call
from ._outputs import output_schema
from ._tools import MemoryTools, dumps, error_json, parse_arguments

log = logging.getLogger("navi_memory.integrations.mcp")

SUMMARY_URI = "navi-memory://summary"
HOUSEHOLD_URI = "navi-memory://household"
PERSON_FIELDS = ("display_name", "role", "pronouns", "aliases", "birth_date", "notes")
INSTRUCTIONS = ("Long-term memory of the user you are talking to: search it before assuming anything about "
                "them, note what is worth remembering across conversations, save stable facts. The user is "
                "fixed by the server; no tool takes a user id.")
RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for an unknown resource URI


class TokenUsers:
    """The SDK's ``TokenVerifier``: a known token is an access token whose subject is its user."""

    def __init__(self, tokens: TokenMap) -> None:
        self.tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        user = self.tokens.user_for(token)
        if user is None:
            return None
        return AccessToken(token=token, client_id=user, subject=user, scopes=[])


def request_user(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The user of the HTTP request behind ``ctx`` (from its bearer token), None off HTTP."""
    scope = getattr(ctx.request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    if isinstance(user, AuthenticatedUser):
        return user.access_token.subject
    return None


class MemoryServer:
    """The MCP server over one store. ``user_id``: the user of a stdio server; an HTTP server
    leaves it unset and takes each request's user from its token. ``agent_id`` / ``run_id``: the
    scope every tool call acts in (none: everything of the user)."""

    def __init__(self, store: Any = None, *, async_store: Any = None, user_id: str | None = None,
                 household: str | None = None, name: str = "navi-memory", agent_id: str | None = None,
                 run_id: str | None = None) -> None:
        self.caller = StoreCaller(store, async_store)
        self.user_id = v.user_id(user_id) if user_id is not None else None
        self.scope = {"agent_id": v.scope_id(agent_id, "agent_id"), "run_id": v.scope_id(run_id, "run_id")}
        self.household = household
        self.server: Server[Any] = Server(
            name, version=__version__, instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            on_list_resources=self._list_resources, on_read_resource=self._read_resource)

    def user_for(self, ctx: ServerRequestContext[Any, Any]) -> str:
        token_user = request_user(ctx)
        if token_user is not None and self.user_id is not None and token_user != self.user_id:
            raise ValidationError("the token's user is not the user this server was started for")
        user = token_user or self.user_id
        if user is None:  # an HTTP app without tokens is never built; this guards a misuse in code
            raise ValidationError("no user: start the server with a user or serve it behind bearer tokens")
        return user

    async def tools_for(self, ctx: ServerRequestContext[Any, Any]) -> MemoryTools:
        """The tool set of the request's user (read per request: the household mode can change)."""
        user = self.user_for(ctx)
        household = self.household
        if household is None:
            household = await self.caller.acall(store_call.household_mode(user_id=user))
        return MemoryTools(self.caller.sync_store, user, async_store=self.caller.async_store, household=household,
                           **self.scope)

    async def _list_tools(self, ctx: ServerRequestContext[Any, Any],
                          params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        tools = await self.tools_for(ctx)
        return types.ListToolsResult(tools=[
            types.Tool(name=name, description=description, input_schema=args.model_json_schema(),
                       output_schema=output_schema(name),
                       annotations=types.ToolAnnotations(read_only_hint=name in READ_ONLY,
                                                         destructive_hint=name in DESTRUCTIVE,
                                                         open_world_hint=False))
            for name, (args, description) in tools.specs.items()])

    async def _call_tool(self, ctx: ServerRequestContext[Any, Any],
                         params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            tools = await self.tools_for(ctx)
            text = await tools.aexecute(params.name, parse_arguments(params.arguments))
        except NaviMemoryError as exc:  # the same {"error": ...} text the framework tools return
            text = error_json(exc)
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=json.loads(text))

    async def _list_resources(self, ctx: ServerRequestContext[Any, Any],
                              params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[
            types.Resource(uri=SUMMARY_URI, name="summary", title="What the assistant knows about the user",
                           description="The user's narrative summary (empty until one is written), escaped like "
                                       "the summary in a prompt: stored text stays data.",
                           mime_type="text/plain"),
            types.Resource(uri=HOUSEHOLD_URI, name="household", title="The user's household and time zone",
                           description="JSON: mode, the user's own time zone and the one in effect, and the "
                                       "members (name, role, pronouns, aliases, birth date, notes).",
                           mime_type="application/json")])

    async def _read_resource(self, ctx: ServerRequestContext[Any, Any],
                             params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri not in (SUMMARY_URI, HOUSEHOLD_URI):
            raise MCPError(RESOURCE_NOT_FOUND, f"unknown resource; the resources are: {SUMMARY_URI}, {HOUSEHOLD_URI}")
        try:
            if uri == SUMMARY_URI:
                summary = await self.caller.acall(store_call.get_summary(user_id=self.user_for(ctx)))
                return types.ReadResourceResult(contents=[types.TextResourceContents(
                    uri=SUMMARY_URI, mime_type="text/plain", text=prompt.escape(str(summary or "")))])
            household = await self.caller.acall(store_call.household(user_id=self.user_for(ctx)))
        except NaviMemoryError as exc:
            raise MCPError(types.INTERNAL_ERROR, json.loads(error_json(exc))["error"]) from exc
        zone = household["timezone"]
        in_effect = zone or self.caller.store.settings.timezone
        record = {"mode": household["mode"], "display_name": household.get("display_name"),
                  "locale": household.get("locale"), "timezone": zone, "in_effect": in_effect,
                  "persons": [{name: getattr(p, name) for name in PERSON_FIELDS} for p in household["persons"]]}
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=HOUSEHOLD_URI, mime_type="application/json", text=dumps(record))])

    def streamable_http_app(self, tokens: TokenMap, *, host: str = "127.0.0.1", port: int = 8767,
                            path: str = "/mcp") -> Any:
        """The Starlette app serving MCP at ``path``; every request needs a bearer token of ``tokens``."""
        shown = f"[{host}]" if ":" in host else host
        # The SDK's bearer check wants an issuer URL; there is no OAuth server here, so it is this one.
        auth = AuthSettings(issuer_url=f"http://{shown}:{port}", resource_server_url=None)  # type: ignore[arg-type]
        return self.server.streamable_http_app(streamable_http_path=path, host=host, auth=auth,
                                               token_verifier=TokenUsers(tokens))

    async def run_stdio(self) -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())


READ_ONLY = {"memory_search", "memory_get", "memory_list_themes", "memory_find_person"}
DESTRUCTIVE = {"memory_forget"}


async def serve(url: str | None, *, embeddings: Any = None, transport: str = "stdio", user_id: str | None = None,
                token_file: str | None = None, host: str = "127.0.0.1", port: int = 8767,
                log_level: str = "warning", agent_id: str | None = None, run_id: str | None = None) -> None:
    """Open an ``AsyncMemoryStore`` at ``url`` and serve it until the client (stdio) or a signal (HTTP) ends it."""
    from ..store import AsyncMemoryStore

    if transport == "stdio":
        if user_id is None:
            raise ConfigurationError("the stdio server acts for one user: pass --user")
        tokens = None
    elif transport == "http":
        if user_id is not None:
            raise ConfigurationError("over HTTP the user comes from the bearer token: drop --user, pass --tokens")
        if token_file is None:
            raise ConfigurationError("the HTTP server needs a token file mapping tokens to users (--tokens)")
        tokens = TokenMap.load(token_file)
    else:
        raise ConfigurationError(f"transport must be 'stdio' or 'http', not {transport!r}")
    store = await AsyncMemoryStore.open(url, embeddings, chat_model=False)
    try:
        server = MemoryServer(async_store=store, user_id=user_id, agent_id=agent_id, run_id=run_id)
        if tokens is None:
            await server.run_stdio()
            return
        import uvicorn

        from ..ui.security import is_loopback
        from ..ui.serving import header_timeout_protocol

        app = server.streamable_http_app(tokens, host=host, port=port)
        if not is_loopback(host):
            log.warning("serving MCP on %s: bearer tokens travel in clear text unless TLS is in front", host)
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level, server_header=False,
                                http=header_timeout_protocol())
        await uvicorn.Server(config).serve()
    finally:
        await store.close()
