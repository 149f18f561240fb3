"""Who may talk to the browser UI and the REST API, and the headers every response carries.

Rules: without a token the server must listen on a loopback address only, and then it also
answers only requests whose Host is a loopback name (a page on another site that re-points its
DNS name at 127.0.0.1 cannot read it). With a token, every request must present it, compared in
constant time. The REST API may also take per-user tokens (a ``TokenMap``): such a request is
marked with its user (``TOKEN_USER`` in the ASGI scope) and reaches only that user's routes.
Pure ASGI middleware, so it guards every route, the static CSS included.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from typing import Any, Awaitable, Callable, Sequence
from urllib.parse import parse_qsl, quote, unquote, unquote_to_bytes, urlencode

from ..errors import ConfigurationError
from ..tokens import TokenMap

COOKIE = "navi_memory_token"
MIN_TOKEN_CHARS = 16
TOKEN_USER = "navi_memory.token_user"  # scope key: the user a per-user token acts for (absent: the admin token)
USER_PATHS = "/api/users/"  # the only routes a per-user token reaches (``web.user_route`` checks whose)
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
# No script may run on these pages: stored text is escaped, and this stops it even if it were not.
HEADERS = [
    (b"content-security-policy", b"default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self';"
                                 b" frame-ancestors 'none'; base-uri 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Secret(str):
    """A token that keeps its value for use but hides it from ``repr`` (Starlette's ``Middleware``
    repr, for one, shows its arguments)."""

    def __repr__(self) -> str:
        return "'***'"


def check_token(token: str | None, host: str, env_name: str, required: bool = False) -> str | None:
    """The token to enforce, or None; ``ConfigurationError`` when the setup would be unsafe."""
    token = token or None
    if token is None and (required or not is_loopback(host)):
        why = "the REST API always needs one" if required else f"binding to {host} exposes the UI beyond this machine"
        raise ConfigurationError(f"a token is required ({why}): pass --token or set {env_name}")
    if token is not None and not (token.isascii() and token.isprintable() and " " not in token):
        raise ConfigurationError("the token must be printable ASCII without spaces (it travels in headers and cookies)")
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigurationError(f"the token must have at least {MIN_TOKEN_CHARS} characters "
                                 "(python -c 'import secrets; print(secrets.token_urlsafe())' makes one)")
    return None if token is None else Secret(token)


def _headers(scope: Scope) -> dict[bytes, bytes]:
    return {k.lower(): v for k, v in scope.get("headers", [])}


def _host_name(scope: Scope) -> str:
    host = _headers(scope).get(b"host", b"").decode("latin-1")
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _undecodable(scope: Scope) -> str | None:
    """Why the address is not valid UTF-8 once percent-decoded, or None. (The server would decode
    it with replacement characters, so ``%ff`` and ``%fe`` would name the same user "\ufffd".)"""
    parts = [("path", scope.get("raw_path")), ("query", scope.get("query_string", b"").replace(b"+", b" "))]
    for name, raw in parts:
        try:
            if raw:
                unquote_to_bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"the {name} of the address is not valid UTF-8 (byte {exc.start} once percent-decoded)"
    return None


def _bearer(scope: Scope) -> str | None:
    auth = _headers(scope).get(b"authorization", b"").decode("latin-1")
    return auth[7:].strip() if auth[:7].lower() == "bearer " else None


def _same(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))


async def _send_json(send: Callable[[Any], Awaitable[None]], status: int, message: str,
                     extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *extra]})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Token (or loopback Host) check on every request, plus the security headers on every response;
    an address that is not valid UTF-8 (percent-decoded) is a 400 for every route.

    ``cookies``: the browser UI also accepts the token from a cookie, set after a visit with
    ``?token=...`` (then redirected to the same address without it). The REST API takes only the
    ``Authorization: Bearer`` header, so a browser cannot be tricked into sending it cross-site.

    ``users``: per-user tokens (as the administrator's: the header, and in the browser the
    cookie); such a request reaches only paths under ``user_paths`` (and there, ``web.user_route``
    checks the user), and in the browser ``/`` takes it to its user's pages. ``token`` then stays
    the administrator's, which reaches every user and the list of users, and may be None."""

    def __init__(self, app: ASGIApp, token: str | None, cookies: bool = True, users: TokenMap | None = None,
                 user_paths: tuple[str, ...] = (USER_PATHS,)) -> None:
        self.app, self.token, self.cookies, self.users, self.user_paths = app, token, cookies, users, user_paths

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *HEADERS]}
            await send(message)

        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        given = query.get("token")
        if self.cookies and given and self._known(given):  # a token link wins over the cookie the browser holds
            await self._set_cookie(scope, query, given, send_with_headers)
            return
        acting = self._token_user(scope)
        if acting is not None:
            root = scope.get("root_path", "")
            path = scope.get("path", "")
            path = path[len(root):] if root and path.startswith(root) else path
            if self.cookies and path == "/":  # the browser's start page lists every user: theirs instead
                await _redirect(send_with_headers, f"{root}/users/{quote(acting, safe='')}/items".encode("ascii"))
                return
            if not path.startswith(self.user_paths):
                await _send_json(send_with_headers, 403, "this token acts for one user: use .../users/<that user>/...")
                return
            scope = {**scope, TOKEN_USER: acting}
        elif self.token is None and self.users is None:
            if not is_loopback(_host_name(scope)):
                await _send_json(send_with_headers, 403, "this server answers only requests to a loopback address")
                return
        elif self.token is None or not self._authorized(scope):
            await _send_json(send_with_headers, 401, "missing or wrong token",
                              [(b"www-authenticate", b'Bearer realm="navi-memory"')])
            return
        problem = _undecodable(scope)
        if problem:
            await _send_json(send_with_headers, 400, problem)
            return
        await self.app(scope, receive, send_with_headers)

    def _presented(self, scope: Scope) -> list[str]:
        """The tokens the request carries: the bearer header's, and in the browser the cookie's."""
        given = [t for t in (_bearer(scope),) if t is not None]
        if self.cookies:
            given += _cookie_values(_headers(scope).get(b"cookie", b"").decode("latin-1"), COOKIE)
        return given

    def _known(self, token: str) -> bool:
        """Whether ``token`` is the administrator's or a user's."""
        return ((self.token is not None and _same(token, self.token))
                or (self.users is not None and self.users.user_for(token) is not None))

    def _token_user(self, scope: Scope) -> str | None:
        """The user of a per-user token the request carries, or None (none, or none configured)."""
        if self.users is None:
            return None
        return next((user for t in self._presented(scope) if (user := self.users.user_for(t)) is not None), None)

    def _authorized(self, scope: Scope) -> bool:
        assert self.token is not None
        return any(_same(t, self.token) for t in self._presented(scope))

    async def _set_cookie(self, scope: Scope, query: dict[str, str], token: str, send: Any) -> None:
        query.pop("token")
        path = scope.get("raw_path") or quote(scope["path"]).encode("ascii")
        if not path.startswith(b"/") or path[1:2] in (b"/", b"\\"):  # //host or /\host would leave the site
            path = b"/"
        target = path + (f"?{urlencode(query)}".encode("ascii") if query else b"")
        # over HTTPS the browser must never send it back over plain HTTP
        secure = "; Secure" if scope.get("scheme") in ("https", "wss") else ""
        cookie = f"{COOKIE}={quote(token, safe='')}; Path=/; HttpOnly; SameSite=Strict{secure}"
        await _redirect(send, target, [(b"set-cookie", cookie.encode("ascii"))])


def _cookie_values(header: str, name: str) -> list[str]:
    """The values of the cookies called ``name`` in a Cookie header, read leniently as browsers
    send it: another site's cookie on this host name (a JSON value, a space) must not hide ours,
    which ``http.cookies`` does by dropping the whole header."""
    found = []
    for part in header.split(";"):
        key, sep, value = part.partition("=")
        if sep and key.strip() == name:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            found.append(unquote(value))
    return found


async def _redirect(send: Callable[[Any], Awaitable[None]], target: bytes,
                    extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": 303, "headers": [
        (b"location", target), (b"content-length", b"0"), *extra]})
    await send({"type": "http.response.body", "body": b""})
