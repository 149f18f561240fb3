"""The REST API with writes (``navi-memory serve``): facts, items (also served as "chunks"),
themes (named and described), the household (name, locale, mode and persons), the user's time
zone, and conversations (``conversations``: turns recorded and extracted, the memory for a turn's
prompt).

Every route is under ``/api/users/{user}/``: the user in the path is the only user a request can
read or change (another user's item id is a 404, as in the store). ``?agent_id=`` / ``?run_id=`` on
an item's routes and on deleting a fact keep the request to that agent's / run's rows, as they keep
a search (another agent's item is a 404 too). Always behind bearer tokens,
taken from the ``Authorization`` header only (no cookie, so no cross-site request can carry it):
the administrator's ``token`` reaches every user and ``GET /api/users``; a per-user token of
``tokens`` (a ``TokenMap``) only its own user's routes (403 elsewhere). One of the two is required.
Reads return the same JSON as the browser UI's ``/api`` mirror. Errors: malformed JSON 400,
rejected values 422, unknown ids 404, each as ``{"error": message, "type": error class}``.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import ConfigurationError, NaviMemoryError, ValidationError
from ..tokens import TokenMap
from ..core.validation import parse_json
from . import pages
from .conversations import conversation_routes
from .pages import Params
from .security import Guard, check_token
from .web import MethodRoute, SafeJSONResponse, call, json_error, path_part, path_user, user_route

FACT_FIELDS = {"category", "key", "value", "source", "confidence", "source_context", "source_session_id",
               "source_message_id", "person", "expires_at", "expires_days", "match_equivalent", "observed_at"}
FACT_SOURCE = "user_explicit"  # a write through the API is a deliberate one
SCOPE_FIELDS = {"agent_id", "run_id"}  # of the query string on a request by id; never changed by a PATCH
MAX_BODY_BYTES = 8 * 1024 * 1024  # far above any valid item (32 KiB content, a vector of a few thousand floats)


async def _read(request: Request) -> bytes:
    """The body, refused with 413 past ``MAX_BODY_BYTES`` (counted while reading, not trusted from headers)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise HTTPException(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _scope(request: Request) -> dict[str, str | None]:
    return pages.call_scope(Params(request.query_params))


async def _body(request: Request, reserved: set[str]) -> dict[str, Any]:
    try:
        data = parse_json(await _read(request) or b"null", "the body")
    except ValidationError as exc:  # malformed, not UTF-8, nested too deeply, a 5,000-digit number
        raise HTTPException(400, str(exc)) from None
    if not isinstance(data, dict):
        raise ValidationError("the body must be a JSON object")
    taken = sorted(reserved & set(data))
    if taken:
        raise ValidationError(f"{', '.join(taken)} cannot be set in the body: the path says which user and item")
    return data


def create_api_app(store: Any, *, token: str | None, host: str = "127.0.0.1",
                   tokens: TokenMap | None = None) -> Starlette:
    """The REST API over an open (blocking) ``MemoryStore``; refuses to exist without a token
    (``token``, the administrator's, and/or ``tokens``, each acting for one user)."""
    if tokens is not None and not isinstance(tokens, TokenMap):
        raise ConfigurationError("tokens must be a TokenMap (TokenMap.load('tokens.json'))")
    if tokens is None or token:  # per-user tokens alone guard every route too
        token = check_token(token, host, "NAVI_MEMORY_API_TOKEN", required=True)

    async def users(request: Request) -> Response:
        return SafeJSONResponse(await call(pages.users_page, store, Params(request.query_params)))

    async def list_items(request: Request) -> Response:
        params = Params(request.query_params)
        builder = pages.search_page if params.text("q") is not None else pages.items_page
        return SafeJSONResponse(await call(builder, store, path_user(request), params))

    async def create_item(request: Request) -> Response:
        data = await _body(request, {"user_id", "id", "self"})
        content = data.pop("content", None)

        added = await call(store.add_note, user_id=path_user(request), content=content, **data)
        item = added.item
        collection = request.url.path.rstrip("/").rsplit("/", 1)[1]
        location = f"{request.scope.get('root_path', '')}/api/users/{path_part(path_user(request))}/{collection}/{item.id}"
        # the same text already stored: 200 with that item ("status": "existing"), nothing created
        return SafeJSONResponse({"user": path_user(request), "item": item, "status": added.action,
                                 "similar": list(added.similar)},
                                status_code=201 if added.action == "added" else 200, headers={"location": location})

    async def get_item(request: Request) -> Response:
        return SafeJSONResponse(await call(pages.item_page, store, path_user(request), request.path_params["item_id"],
                                           _scope(request)))

    async def update_item(request: Request) -> Response:
        changes = await _body(request, {"user_id", "item_id", "id", "self"})
        if not changes:
            raise ValidationError("nothing to update: the body has no fields")
        fixed = sorted(SCOPE_FIELDS & set(changes))
        if fixed:
            raise ValidationError(f"an item's {' and '.join(fixed)} cannot be changed (?agent_id= / ?run_id= name"
                                  " the scope the request acts in)")
        item = await call(store.update, request.path_params["item_id"], user_id=path_user(request),
                          **_scope(request), **changes)
        return SafeJSONResponse({"user": path_user(request), "item": item})

    async def delete_item(request: Request) -> Response:
        await call(store.delete, request.path_params["item_id"], user_id=path_user(request), **_scope(request))
        return Response(status_code=204)

    async def list_facts(request: Request) -> Response:
        return SafeJSONResponse(await call(pages.facts_page, store, path_user(request), Params(request.query_params)))

    async def upsert_fact(request: Request) -> Response:
        data = await _body(request, {"user_id"})
        unknown = sorted(set(data) - FACT_FIELDS)
        if unknown:
            raise ValidationError(f"unknown fact field(s): {', '.join(unknown)}")
        data.setdefault("source", FACT_SOURCE)
        data = {k: data.get(k) for k in ("category", "key", "value")} | data
        change = await call(store.upsert_fact, user_id=path_user(request), **data)
        return SafeJSONResponse(change, status_code=201 if change.action == "added" else 200)

    async def delete_facts(request: Request) -> Response:
        params = Params(request.query_params)
        key = params.text("key")
        if key is None:
            raise ValidationError("give the fact to delete: ?key=...[&category=...]")
        count = await call(store.delete_fact, key, user_id=path_user(request), category=params.text("category"),
                           **pages.call_scope(params))
        return SafeJSONResponse({"deleted": count})

    def _zone(zone: str | None) -> dict[str, Any]:
        """The user's own zone and the one search uses for them (else the store's)."""
        return {"timezone": zone, "in_effect": zone or store.settings.timezone}

    def _household(user: str, household: dict[str, Any]) -> Response:
        return SafeJSONResponse({"user": user} | household | _zone(household["timezone"]))

    async def get_household(request: Request) -> Response:
        return _household(path_user(request), await call(store.household, user_id=path_user(request)))

    async def put_household(request: Request) -> Response:
        data = await _body(request, {"user_id"})
        unknown = sorted(set(data) - {"mode", "members", "timezone", "replace", "display_name", "locale"})
        if unknown:
            raise ValidationError(f"unknown household field(s): {', '.join(unknown)}; give mode, members,"
                                  " timezone, replace, display_name and/or locale")
        return _household(path_user(request), await call(store.put_household, user_id=path_user(request), **data))

    async def list_themes(request: Request) -> Response:
        themes = await call(store.list_themes, user_id=path_user(request))
        return SafeJSONResponse({"user": path_user(request), "themes": themes})

    async def put_theme(request: Request) -> Response:
        data = await _body(request, {"user_id", "slug"})
        unknown = sorted(set(data) - {"display_name", "description"})
        if unknown:
            raise ValidationError(f"unknown theme field(s): {', '.join(unknown)}; give display_name and/or description")
        theme = await call(store.set_theme, request.path_params["slug"], user_id=path_user(request), **data)
        return SafeJSONResponse({"user": path_user(request), "theme": theme})

    async def get_memory(request: Request) -> Response:
        enabled = await call(store.memory_enabled, user_id=path_user(request))
        return SafeJSONResponse({"user": path_user(request), "memory_enabled": enabled})

    async def put_memory(request: Request) -> Response:
        data = await _body(request, {"user_id"})
        if set(data) != {"memory_enabled"}:
            raise ValidationError('give {"memory_enabled": false} (or true)')
        enabled = await call(store.set_memory_enabled, data["memory_enabled"], user_id=path_user(request))
        return SafeJSONResponse({"user": path_user(request), "memory_enabled": enabled})

    async def remove_person(request: Request) -> Response:
        ref = request.path_params["ref"]
        person = await call(store.remove_person, int(ref) if ref.isascii() and ref.isdigit() and len(ref) < 19
                            else ref, user_id=path_user(request))
        return SafeJSONResponse({"user": path_user(request), "removed": person})

    async def forget_user(request: Request) -> Response:
        user = path_user(request)
        if Params(request.query_params).text("confirm") != user:
            raise ValidationError("this deletes everything stored for the user: add ?confirm=<the user id>")
        return SafeJSONResponse({"user": user, "deleted": await call(store.forget, user_id=user)})

    async def memory_markdown(request: Request) -> Response:
        text = await call(store.memory_markdown, user_id=path_user(request))
        return Response(text, media_type="text/markdown; charset=utf-8")

    def _timezone(user: str, zone: str | None) -> Response:
        return SafeJSONResponse({"user": user} | _zone(zone))

    async def get_timezone(request: Request) -> Response:
        return _timezone(path_user(request), await call(store.user_timezone, user_id=path_user(request)))

    async def put_timezone(request: Request) -> Response:
        data = await _body(request, {"user_id"})
        if set(data) != {"timezone"}:
            raise ValidationError('give {"timezone": "Europe/Lisbon"} (or null: the store\'s zone applies again)')
        zone = await call(store.set_user_timezone, data["timezone"], user_id=path_user(request))
        return _timezone(path_user(request), zone)

    async def read_page(request: Request) -> Response:
        builder = {"summary": pages.summary_page, "search": pages.search_page}[request.url.path.rsplit("/", 1)[1]]
        return SafeJSONResponse(await call(builder, store, path_user(request), Params(request.query_params)))

    async def on_error(request: Request, exc: Exception) -> Response:
        return json_error(request, exc, validation_status=422)

    user = "/api/users/{user:path}"
    routes = [Route("/api/users", users),
              user_route(f"{user}/facts", list_facts, methods=["GET"]),
              user_route(f"{user}/facts", upsert_fact, methods=["POST", "PUT"]),
              user_route(f"{user}/facts", delete_facts, methods=["DELETE"]),
              user_route(f"{user}/household", get_household, methods=["GET"]),
              user_route(f"{user}/household", put_household, methods=["PUT"]),
              user_route(f"{user}/themes", list_themes, methods=["GET"]),
              user_route(f"{user}/themes/{{slug}}", put_theme, methods=["PUT"]),
              user_route(f"{user}/timezone", get_timezone, methods=["GET"]),
              user_route(f"{user}/timezone", put_timezone, methods=["PUT"]),
              user_route(f"{user}/household/persons/{{ref}}", remove_person, methods=["DELETE"]),
              user_route(f"{user}/memory.md", memory_markdown, methods=["GET"]),
              user_route(f"{user}/memory", get_memory, methods=["GET"]),
              user_route(f"{user}/memory", put_memory, methods=["PUT"]),
              user_route(f"{user}/summary", read_page), user_route(f"{user}/search", read_page)]
    for name in ("items", "chunks"):  # two paths to the same rows: .../chunks/7 is .../items/7
        routes += [user_route(f"{user}/{name}", list_items, methods=["GET"]),
                   user_route(f"{user}/{name}", create_item, methods=["POST"]),
                   user_route(f"{user}/{name}/{{item_id:int}}", get_item, methods=["GET"]),
                   user_route(f"{user}/{name}/{{item_id:int}}", update_item, methods=["PATCH"]),
                   user_route(f"{user}/{name}/{{item_id:int}}", delete_item, methods=["DELETE"])]
    routes += conversation_routes(store, user, _body)
    # everything the user has: last, and matching no other method (GET .../typo stays a 404)
    routes.append(user_route(user, forget_user, methods=["DELETE"], route_class=MethodRoute))
    return Starlette(routes=routes, middleware=[Middleware(Guard, token=token, cookies=False, users=tokens)],
                     exception_handlers={NaviMemoryError: on_error, HTTPException: on_error})

