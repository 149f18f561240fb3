"""Pieces both web apps share: JSON that is inert in a browser, error responses, store calls off
the event loop. The store is the blocking ``MemoryStore``; each call runs in Starlette's thread
pool (SQLite keeps one connection per thread, PostgreSQL uses its pool)."""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Awaitable, Callable
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.convertors import Convertor, IntegerConvertor
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route

from ..errors import BackendUnavailableError, MemoryOffError, NaviMemoryError, NotFoundError, ValidationError
from ..core.validation import user_id
from .pages import jsonable
from .security import TOKEN_USER

log = logging.getLogger("navi_memory.ui")


class SafeJSONResponse(JSONResponse):
    """JSON with ``<``, ``>`` and ``&`` written as ``\\u`` escapes (still the same JSON), so stored
    markup stays inert even if a browser were made to render the body as HTML."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(jsonable(content), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode("utf-8")


class IdConvertor(Convertor[str]):
    """The ``{item_id:int}`` of a route made by ``id_route``: the digits of an id, passed on as text
    for ``validation.item_id`` to turn into an int or refuse (422). Starlette's own ``int`` convertor
    calls ``int()`` while routing: past 4,300 digits that is a ValueError and a 500."""

    regex = "[0-9]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: Any) -> str:
        return str(value)


class MethodRoute(Route):
    """A route that does not match other methods at all: ``DELETE /api/users/{user:path}`` must not
    turn ``GET /api/users/u1/typo`` into a 405 (the path matches, as user ``u1/typo``): a 404."""

    def matches(self, scope: Any) -> tuple[Match, Any]:
        match, child = super().matches(scope)
        return (Match.NONE, {}) if match is Match.PARTIAL else (match, child)


def id_route(path: str, endpoint: Callable[..., Any], route_class: type[Route] = Route, **kwargs: Any) -> Route:
    """A ``Route`` whose ``{name:int}`` parameters are read by ``IdConvertor`` (same path, same regex)."""
    route = route_class(path, endpoint, **kwargs)
    for name, convertor in route.param_convertors.items():
        if isinstance(convertor, IntegerConvertor):
            route.param_convertors[name] = IdConvertor()
    return route


def path_part(value: Any) -> str:
    """A value as one URL path segment ("/" and "." sequences included, so nothing is normalised away)."""
    return quote(str(value), safe="")


def user_route(path: str, endpoint: Callable[[Request], Awaitable[Response]], **kwargs: Any) -> Route:
    """A route under ``{user:path}`` whose user may hold a newline (``alice%0A``): it reaches
    ``path_user`` and is refused by name, instead of matching no route (``path`` stops at newlines).
    A request with a per-user token (``security.TOKEN_USER``) for another user is a 403."""

    async def for_the_token_user(request: Request) -> Response:
        acting = request.scope.get(TOKEN_USER)
        if acting is not None and path_user(request) != acting:
            raise HTTPException(403, "this token acts for another user")
        return await endpoint(request)

    kwargs.setdefault("name", endpoint.__name__)
    route = id_route(path, for_the_token_user, **kwargs)  # and its ids read by IdConvertor
    route.path_regex = re.compile(route.path_regex.pattern, re.DOTALL)
    return route


def path_user(request: Request) -> str:
    """The user of the path, exact or refused (``ValidationError``) before any page or route reads
    or writes: ``/users/alice%20/...`` is not alice's (``validation.user_id``)."""
    return user_id(request.path_params["user"])


async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await run_in_threadpool(fn, *args, **kwargs)


def error_status(exc: Exception, validation_status: int) -> tuple[int, str]:
    if isinstance(exc, HTTPException):
        return exc.status_code, str(exc.detail)
    if isinstance(exc, ValidationError):
        return validation_status, str(exc)
    if isinstance(exc, NotFoundError):
        return 404, str(exc)
    if isinstance(exc, MemoryOffError):  # the user's choice, not a bad request: nothing was written
        return 409, str(exc)
    if isinstance(exc, BackendUnavailableError):
        return 503, str(exc)
    log.error("request failed: %s: %s", type(exc).__name__, exc)
    return 500, f"{type(exc).__name__}: {exc}" if isinstance(exc, NaviMemoryError) else "internal error"


def json_error(request: Request, exc: Exception, validation_status: int = 422) -> Response:
    status, message = error_status(exc, validation_status)
    return SafeJSONResponse({"error": message, "type": type(exc).__name__}, status_code=status)
