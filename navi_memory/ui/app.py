"""The read-only memory browser: server-rendered pages and the ``/api`` JSON that mirrors each page.

Only GET routes exist (a test checks it), so nothing here can change memory. Templates are
Jinja2 with autoescaping on for every template; no page contains a script, and the Content
Security Policy set by ``security.Guard`` forbids scripts anyway.
"""

from __future__ import annotations

import json
from datetime import datetime
from importlib import resources
from typing import Any, Awaitable, Callable
from urllib.parse import quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from ..errors import ConfigurationError, NaviMemoryError
from ..tokens import TokenMap
from ..models import FACT_CATEGORIES, FACT_SORT_FIELDS, ITEM_STATUSES, ITEM_TYPES, SESSION_STATES
from ..core.timeutil import minute_text
from ..core.validation import user_id
from . import activity, pages
from .pages import Params
from .security import Guard, check_token
from .web import SafeJSONResponse, call, error_status, json_error, path_part, path_user, user_route

Builder = Callable[..., dict[str, Any]]  # (store, user, params...) -> a page's data

# suffix after /users/{user}/, page builder, template
USER_PAGES: list[tuple[str, Builder, str]] = [
    ("items", pages.items_page, "items.html"),
    ("facts", pages.facts_page, "facts.html"),
    ("summary", pages.summary_page, "summary.html"),
    ("search", pages.search_page, "search.html"),
    ("household", activity.household_page, "household.html"),
    ("sessions", activity.sessions_page, "sessions.html"),
    ("session", activity.session_page, "session.html"),
    ("usage", activity.usage_page, "usage.html"),
]


def _known(builder: Builder) -> Builder:
    """``builder`` run only for a user the store holds something for: an unknown user is a 404
    ("no memory stored"), not a set of empty pages that look like a real user with nothing."""
    def run(store: Any, user: str, *args: Any) -> dict[str, Any]:
        activity.require_memory(store, user)
        return builder(store, user, *args)
    return run


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(loader=jinja2.PackageLoader("navi_memory.ui", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["seg"] = path_part
    env.filters["when"] = lambda d: minute_text(d) if isinstance(d, datetime) else ""
    env.filters["num"] = lambda x: "" if x is None else f"{x:.3f}"
    env.filters["thousands"] = lambda x: f"{x:,}"
    env.filters["pretty"] = lambda x: json.dumps(pages.jsonable(x), ensure_ascii=False, indent=2, sort_keys=True)
    env.globals.update(item_types=ITEM_TYPES, item_statuses=ITEM_STATUSES, fact_categories=FACT_CATEGORIES,
                       fact_sorts=FACT_SORT_FIELDS, session_states=SESSION_STATES,
                       with_query=_with_query, json_twin=_json_twin)
    return Jinja2Templates(env=env)


def _here(request: Request) -> str:
    """The current page's path as the browser sent it, still percent-encoded: the decoded path
    would turn user ``%41``'s links into user ``A``'s, and cut links at a ``?`` or ``#`` in an id."""
    raw = request.scope.get("raw_path")
    if not raw:
        return quote(request.url.path)
    # an ASGI server may pass bytes beyond ASCII on (h11 refuses them): encoded, not a 500
    return raw.decode("ascii") if raw.isascii() else quote(raw, safe="/%")


def _with_query(request: Request, **changes: Any) -> str:
    """The current page's address with some query parameters replaced (None removes one)."""
    query = {k: v for k, v in request.query_params.items() if k not in changes and k != "token"}
    query.update({k: v for k, v in changes.items() if v is not None and v is not False})
    return _here(request) + (f"?{urlencode(query)}" if query else "")


def _json_twin(request: Request) -> str:
    """The address of the page's JSON twin under /api."""
    root = request.scope.get("root_path", "")
    query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
    return f"{root}/api{_here(request)[len(root):]}" + (f"?{query}" if query else "")


def create_app(store: Any, *, token: str | None = None, host: str = "127.0.0.1",
               tokens: TokenMap | None = None) -> Starlette:
    """The browser UI over an open (blocking) ``MemoryStore``. ``token``: required on every request
    when given, and mandatory when ``host`` is not a loopback address (unless ``tokens``). ``tokens``:
    per-user tokens (a ``TokenMap``): each shows only its own user's pages, so a user can see what
    is stored about them; ``token`` stays the administrator's (every user, the list of users)."""
    if tokens is not None and not isinstance(tokens, TokenMap):
        raise ConfigurationError("tokens must be a TokenMap (TokenMap.load('tokens.json'))")
    if tokens is None or token:  # per-user tokens alone guard every page too
        token = check_token(token, host, "NAVI_MEMORY_UI_TOKEN")
    templates = _templates()
    css = resources.files("navi_memory.ui").joinpath("static/ui.css").read_text(encoding="utf-8")

    def render(request: Request, template: str, data: dict[str, Any], status: int = 200) -> Response:
        return templates.TemplateResponse(request, template, {**data, "root": request.scope.get("root_path", "")},
                                          status_code=status)

    async def users(request: Request) -> Response:
        return render(request, "users.html", await call(pages.users_page, store, Params(request.query_params)))

    async def users_json(request: Request) -> Response:
        return SafeJSONResponse(await call(pages.users_page, store, Params(request.query_params)))

    async def pick(request: Request) -> Response:
        raw = request.query_params.get("user") or ""
        if not raw.strip():
            return RedirectResponse(request.url_for("users").path, status_code=303)
        user = user_id(raw)  # exact or refused (400): "alice " never lands on alice's pages
        return RedirectResponse(f"{request.scope.get('root_path', '')}/users/{path_part(user)}/items", status_code=303)

    def user_page(builder: Builder, template: str | None) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            data = await call(_known(builder), store, path_user(request), Params(request.query_params))
            return SafeJSONResponse(data) if template is None else render(request, template, data)
        return endpoint

    async def item(request: Request) -> Response:
        data = await call(_known(pages.item_page), store, path_user(request), request.path_params["item_id"])
        return render(request, "item.html", data)

    async def item_json(request: Request) -> Response:
        data = await call(_known(pages.item_page), store, path_user(request), request.path_params["item_id"])
        return SafeJSONResponse(data)

    async def stylesheet(request: Request) -> Response:
        return Response(css, media_type="text/css")

    async def on_error(request: Request, exc: Exception) -> Response:
        if request.url.path.startswith(f"{request.scope.get('root_path', '')}/api/"):
            return json_error(request, exc, validation_status=400)
        status, message = error_status(exc, 400)
        return render(request, "error.html", {"status": status, "message": message}, status=status)

    routes = [Route("/", users, name="users"), Route("/ui.css", stylesheet), Route("/pick", pick),
              Route("/api/users", users_json),
              user_route("/users/{user:path}/items/{item_id:int}", item),
              user_route("/api/users/{user:path}/items/{item_id:int}", item_json)]
    for suffix, builder, template in USER_PAGES:
        routes.append(user_route(f"/users/{{user:path}}/{suffix}", user_page(builder, template), name=suffix))
        routes.append(user_route(f"/api/users/{{user:path}}/{suffix}", user_page(builder, None)))
    return Starlette(routes=routes, middleware=[Middleware(Guard, token=token, cookies=True, users=tokens,
                                                           user_paths=("/users/", "/api/users/", "/ui.css"))],
                     exception_handlers={NaviMemoryError: on_error, HTTPException: on_error})
