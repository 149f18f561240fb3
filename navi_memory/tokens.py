"""Bearer tokens that each act for one user: the token file of the MCP server over HTTP
(``navi-memory mcp --transport http --tokens FILE``) and of the REST API (``navi-memory serve
--tokens FILE``). Standard library only, so either server can use it without the other's extra."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import stat
from pathlib import Path

from .core import validation as v
from .errors import ConfigurationError, ValidationError

log = logging.getLogger("navi_memory")

MIN_TOKEN_CHARS = 16


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenMap:
    """Bearer tokens and the users they act for, from a JSON file ``{"<token>": "<user id>", ...}``.

    Only the tokens' SHA-256 digests are kept (a lookup by digest leaks no timing about the
    token itself); neither tokens nor the file's content appear in messages or reprs."""

    def __init__(self, tokens: dict[str, str]) -> None:
        if not tokens:
            raise ConfigurationError("the token file maps no tokens to users")
        self._users: dict[bytes, str] = {}
        for token, user in tokens.items():
            if not isinstance(token, str) or not (token.isascii() and token.isprintable() and " " not in token):
                raise ConfigurationError("every token must be printable ASCII without spaces")
            if len(token) < MIN_TOKEN_CHARS:
                raise ConfigurationError(f"every token must have at least {MIN_TOKEN_CHARS} characters "
                                         "(python -c 'import secrets; print(secrets.token_urlsafe())' makes one)")
            try:
                self._users[_digest(token)] = v.user_id(user)
            except ValidationError as exc:
                raise ConfigurationError(f"a token maps to an invalid user id: {exc}") from exc

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "TokenMap":
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
            mode = path.stat().st_mode
        except OSError as exc:
            raise ConfigurationError(f"cannot read the token file {path}: {exc.strerror}") from exc
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("the token file %s is readable by other users (chmod 600 it)", path)
        try:
            data = json.loads(text)
        except ValueError as exc:  # the content is secret: only where it broke
            raise ConfigurationError(f"the token file {path} is not JSON (line {getattr(exc, 'lineno', '?')})") \
                from exc
        if not isinstance(data, dict):
            raise ConfigurationError(f"the token file {path} must hold a JSON object {{\"<token>\": \"<user>\"}}")
        return cls(data)

    def user_for(self, token: str) -> str | None:
        return self._users.get(_digest(token))

    def __len__(self) -> int:
        return len(self._users)

    def __repr__(self) -> str:
        return f"TokenMap({len(self)} tokens)"


def _read_file(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # the content is secret: not echoed
        raise ConfigurationError(f"cannot read the token file {path} as JSON: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"the token file {path} must hold a JSON object {{\"<token>\": \"<user>\"}}")
    return data


def _write_file(path: Path, tokens: dict[str, str]) -> None:
    """Replace the file in one step (a reader never sees half of it), readable by its owner only."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(tokens, out, indent=1, sort_keys=True)
        out.write("\n")
    os.replace(tmp, path)


def issue_token(path: str | os.PathLike[str], user_id: str) -> str:
    """A new random token for ``user_id`` added to the token file (created, mode 600, if missing);
    returns it (the only time it is shown). Servers read the file when they start."""
    uid = v.user_id(user_id)
    file = Path(path)
    tokens = _read_file(file)
    token = secrets.token_urlsafe(32)
    tokens[token] = uid
    TokenMap(tokens)  # the whole file still valid
    _write_file(file, tokens)
    return token


def revoke_tokens(path: str | os.PathLike[str], user_id: str) -> int:
    """Remove every token of ``user_id`` from the token file; returns how many."""
    uid = v.user_id(user_id)
    file = Path(path)
    tokens = _read_file(file)
    kept = {token: user for token, user in tokens.items() if user != uid}
    if len(kept) != len(tokens):
        _write_file(file, kept)
    return len(tokens) - len(kept)
