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
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, Mapping

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # Windows: no advisory lock; one token command at a time there
    fcntl = None

from .core import validation as v
from .core.timeutil import to_utc
from .errors import ConfigurationError, ValidationError

log = logging.getLogger("navi_memory")

MIN_TOKEN_CHARS = 16
RELOAD_SECONDS = 1.0  # how often a loaded token file is looked at for changes (at most)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def _entry(value: Any) -> tuple[str, datetime | None]:
    """A token's user and expiry from its value in the file: ``"<user id>"``, or
    ``{"user": "<user id>", "expires_at": "<ISO 8601>"}``."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"user", "expires_at"})
        if unknown:
            raise ConfigurationError(f"a token's entry has unknown keys {unknown} (user, expires_at)")
        user, expires = value.get("user"), value.get("expires_at")
    else:
        user, expires = value, None
    try:
        uid = v.user_id(user)
    except ValidationError as exc:
        raise ConfigurationError(f"a token maps to an invalid user id: {exc}") from exc
    if expires is None:
        return uid, None
    try:
        if not isinstance(expires, str):
            raise ValueError("not a string")
        return uid, to_utc(expires)
    except (ValueError, OverflowError) as exc:
        raise ConfigurationError("a token's expires_at is not an ISO 8601 date and time") from exc


def _parse(tokens: Mapping[str, Any]) -> dict[bytes, tuple[str, datetime | None]]:
    users: dict[bytes, tuple[str, datetime | None]] = {}
    for token, value in tokens.items():
        if not isinstance(token, str) or not (token.isascii() and token.isprintable() and " " not in token):
            raise ConfigurationError("every token must be printable ASCII without spaces")
        if len(token) < MIN_TOKEN_CHARS:
            raise ConfigurationError(f"every token must have at least {MIN_TOKEN_CHARS} characters "
                                     "(python -c 'import secrets; print(secrets.token_urlsafe())' makes one)")
        users[_digest(token)] = _entry(value)
    return users


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


class TokenMap:
    """Bearer tokens and the users they act for, from a JSON file ``{"<token>": "<user id>", ...}``;
    a token's value may also be ``{"user": "<user id>", "expires_at": "<ISO 8601>"}``, after which
    the token no longer acts (``navi-memory token --expires-days``).

    A map loaded from a file (``load``) follows it: a lookup looks at the file at most once a
    second and reads it again when it changed, so a token added or revoked there acts or stops
    acting without a restart. A changed file that cannot be read or is invalid is logged as an
    error and leaves no per-user token acting until it is fixed (failing closed: a revocation is
    never undone by a bad edit). Only the tokens' SHA-256 digests are kept (a lookup by digest
    leaks no timing about the token itself); neither tokens nor the file's content appear in
    messages or reprs."""

    def __init__(self, tokens: Mapping[str, Any]) -> None:
        if not tokens:
            raise ConfigurationError("the token file maps no tokens to users")
        self._users = _parse(tokens)
        self._path: Path | None = None
        self._seen: tuple[int, int, int] | None = None
        self._looked = 0.0

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "TokenMap":
        path = Path(path)
        seen = _signature(path)
        tokens = cls(_load_json(path))
        tokens._path, tokens._seen, tokens._looked = path, seen, time.monotonic()
        return tokens

    def user_for(self, token: str) -> str | None:
        """The user ``token`` acts for; None for an unknown or expired token."""
        if self._path is not None and time.monotonic() - self._looked >= RELOAD_SECONDS:
            self._follow(self._path)
        entry = self._users.get(_digest(token))
        if entry is None:
            return None
        user, expires = entry
        if expires is not None and datetime.now(timezone.utc) >= expires:
            return None
        return user

    def _follow(self, path: Path) -> None:
        """Read the file again if it changed since it was last read (one thread at a time does it;
        the others go on with the tokens they have, which are swapped in one assignment)."""
        self._looked = time.monotonic()
        seen = _signature(path)
        if seen == self._seen:
            return
        self._seen = seen
        try:
            users = _parse(_load_json(path))
        except ConfigurationError as exc:
            log.error("%s; no per-user token acts until it is fixed", exc)
            users = {}
        self._users = users
        log.info("token file %s read again: %d tokens", path, len(users))

    def __len__(self) -> int:
        return len(self._users)

    def __repr__(self) -> str:
        return f"TokenMap({len(self)} tokens)"


def _load_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except OSError as exc:
        raise ConfigurationError(f"cannot read the token file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:  # the content is secret: only where it broke
        raise ConfigurationError(f"the token file {path} is not UTF-8 text (byte {exc.start})") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("the token file %s is readable by other users (chmod 600 it)", path)
    try:
        data = json.loads(text)
    except ValueError as exc:  # the content is secret: only where it broke
        raise ConfigurationError(f"the token file {path} is not JSON (line {getattr(exc, 'lineno', '?')})") \
            from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"the token file {path} must hold a JSON object {{\"<token>\": \"<user>\"}}")
    return data


def _read_file(path: Path) -> dict[str, Any]:
    return _load_json(path) if path.exists() else {}


def _write_file(path: Path, tokens: dict[str, Any]) -> None:
    """Replace the file in one step (a reader never sees half of it), readable by its owner only.
    The temporary file is a new one of a name nobody can guess (mkstemp: O_EXCL), so a link
    planted beside the file cannot redirect the tokens."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(tokens, out, indent=1, sort_keys=True)
            out.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextmanager
def _changing(path: Path) -> Iterator[None]:
    """One change of the token file at a time, across processes (an exclusive lock on a file beside
    it): two ``token`` commands at once each read, change and wrote the file, and one's change
    was lost: a revoked token came back, an issued one never acted."""
    if not path.parent.is_dir():
        raise ConfigurationError(f"cannot write the token file {path}: the folder {path.parent} does not exist")
    try:
        lock = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ConfigurationError(f"cannot write the token file {path}: {exc.strerror}") from exc
    try:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lock)  # closing releases the lock


def issue_token(path: str | os.PathLike[str], user_id: str, expires_days: float | None = None) -> str:
    """A new random token for ``user_id`` added to the token file (created, mode 600, if missing);
    returns it (the only time it is shown). ``expires_days``: the token stops acting that many
    days from now. Servers that loaded the file take it within a second."""
    uid = v.user_id(user_id)
    if expires_days is not None and (isinstance(expires_days, bool) or not 0 < expires_days <= 36_500):
        raise ValidationError("expires_days must be more than 0 and at most 36,500")
    file = Path(path)
    with _changing(file):
        tokens = _read_file(file)
        token = secrets.token_urlsafe(32)
        tokens[token] = uid if expires_days is None else {
            "user": uid, "expires_at": (datetime.now(timezone.utc) + timedelta(days=expires_days)).isoformat()}
        TokenMap(tokens)  # the whole file still valid
        _write_file(file, tokens)
    return token


def revoke_tokens(path: str | os.PathLike[str], user_id: str) -> int:
    """Remove every token of ``user_id`` from the token file; returns how many. Servers that
    loaded the file stop taking them within a second."""
    uid = v.user_id(user_id)
    file = Path(path)
    with _changing(file):
        tokens = _read_file(file)
        kept = {token: value for token, value in tokens.items() if _entry(value)[0] != uid}
        if len(kept) != len(tokens):
            _write_file(file, kept)
    return len(tokens) - len(kept)
