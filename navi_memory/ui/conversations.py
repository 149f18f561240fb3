"""The REST API's conversation routes, for hosts that are not Python: record a conversation's
turns (memory is extracted from them as in the LangChain and LlamaIndex adapters: every few user
messages, on "remember that ...", and when a stale session is found), run an extraction now, read
sessions, and get the memory a turn's prompt should carry (the adapters' stable and volatile
parts). Session ids travel in the body or as ``?id=``: they are free text, "/" included.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..core import validation as v
from ..errors import ValidationError
from ..integrations._caller import StoreCaller
from ..integrations._context import MemoryContextBuilder
from .activity import session_page, sessions_page
from .pages import Params
from .web import SafeJSONResponse, call, path_user, user_route

Body = Callable[[Request, set[str]], Awaitable[dict[str, Any]]]
CONTEXT_RESULTS = 8  # the adapters' default k


def _fields(data: dict[str, Any], allowed: set[str], required: set[str]) -> dict[str, Any]:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValidationError(f"unknown field(s): {', '.join(unknown)} (one of {', '.join(sorted(allowed))})")
    missing = sorted(required - set(data))
    if missing:
        raise ValidationError(f"give {', '.join(missing)}")
    for name in ("triggers", "final", "force"):
        if name in data and not isinstance(data[name], bool):
            raise ValidationError(f"{name} must be true or false")
    return data


def conversation_routes(store: Any, user: str, body: Body) -> list[Route]:
    """The routes under ``user`` (the ``{user:path}`` prefix); ``body`` reads a JSON object body."""
    builder = MemoryContextBuilder(StoreCaller(store))

    async def list_or_get(request: Request) -> Response:
        params = Params(request.query_params)
        page = session_page if "id" in request.query_params else sessions_page
        return SafeJSONResponse(await call(page, store, path_user(request), params))

    async def start(request: Request) -> Response:
        data = _fields(await body(request, {"user_id"}), {"session_id"}, set())
        session = await call(store.start_session, user_id=path_user(request), session_id=data.get("session_id"))
        return SafeJSONResponse({"user": path_user(request), "session": session}, status_code=201)

    async def messages(request: Request) -> Response:
        data = _fields(await body(request, {"user_id"}), {"session_id", "messages", "agent_id", "run_id", "triggers"},
                       {"session_id", "messages"})
        result = await call(store.add_messages, data["session_id"], data["messages"], user_id=path_user(request),
                            triggers=data.get("triggers", True), agent_id=data.get("agent_id"),
                            run_id=data.get("run_id"))
        return SafeJSONResponse({"user": path_user(request), "result": result},
                                status_code=201 if result.created else 200)

    async def extract(request: Request) -> Response:
        data = _fields(await body(request, {"user_id"}), {"session_id", "final", "force"}, {"session_id"})
        report = await call(store.extract_session, data["session_id"], user_id=path_user(request),
                            final=data.get("final", True), force=data.get("force", False))
        return SafeJSONResponse({"user": path_user(request), "report": report})

    async def context(request: Request) -> Response:
        params = Params(request.query_params)
        query = request.query_params.get("q")
        if query is not None:
            query = v.text(query, "q", store.settings.max_content_bytes, allow_empty=True)
        k = params.integer("k", CONTEXT_RESULTS, 1, v.MAX_LIMIT)
        turn = MemoryContextBuilder(StoreCaller(store), k=k) if k != CONTEXT_RESULTS else builder
        built = await call(turn.build, query, params.flag("first"), user_id=path_user(request))
        if built is None:  # NAVI_MEMORY_INJECTION off, or the kill switch on
            return SafeJSONResponse({"user": path_user(request), "enabled": False, "stable": None,
                                     "volatile": None, "available": True, "results": []})
        return SafeJSONResponse({"user": path_user(request), "enabled": True, "stable": built.stable,
                                 "volatile": built.volatile, "available": built.available,
                                 "results": built.results})

    return [user_route(f"{user}/sessions", list_or_get, methods=["GET"]),
            user_route(f"{user}/sessions", start, methods=["POST"]),
            user_route(f"{user}/messages", messages, methods=["POST"]),
            user_route(f"{user}/extract", extract, methods=["POST"]),
            user_route(f"{user}/context", context, methods=["GET"])]
