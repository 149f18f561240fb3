"""How the PostgreSQL backend connects: the libpq URL, psycopg's ``prepare_threshold``, and the
session settings every connection gets. All of it works through a transaction-mode pooler
(PgBouncer): nothing is sent that a pooler refuses or that would outlive a transaction unseen.

* ``prepare_threshold`` (psycopg's: a statement run that many times on a connection is prepared;
  ``None`` never prepares) comes from ``backend_options`` or the URL's ``?prepare_threshold=none``
  (taken out of the URL before libpq sees it). Behind PgBouncer before 1.21 (no
  ``max_prepared_statements``) it must be ``none``: the prepared statement stays on the server
  connection of one transaction, and the next transaction, on another one, fails.
* The time zone and date style are set by a statement once per connection, not through the
  startup packet's ``options``: PgBouncer refuses ``options`` ("unsupported startup parameter") or,
  told to ignore it, drops it silently. TimeZone and DateStyle are parameters PgBouncer tracks: it
  sets them again on whichever server connection serves the client's next transaction.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from ...config import DatabaseURL
from ...errors import ConfigurationError

PREPARE_THRESHOLD = 5  # psycopg's default
URL_PARAMETER = "prepare_threshold"
# UTC and ISO whatever the server's, database's, role's or URL's defaults: timestamps then read back
# as stored (in Europe/Oslo, 9999-12-31T23:59:59Z would read as year 10000 and fail; psycopg cannot
# read timestamptz text in the SQL, German or Postgres date styles at all).
SESSION_SETTINGS = "SELECT set_config('TimeZone', 'UTC', false), set_config('DateStyle', 'ISO', false)"


def prepare_threshold(value: Any) -> int | None:
    """A threshold as psycopg takes it: a whole number >= 0, or None (in a URL: "none" or "off")."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("none", "off"):
            return None
        if text.isdigit():
            return int(text)
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ConfigurationError(f"prepare_threshold must be a whole number >= 0 or none, not {value!r}")


def split_url(url: DatabaseURL) -> tuple[str, int | None]:
    """The libpq URL (without ``prepare_threshold``) and the URL's threshold (psycopg's default
    when it has none)."""
    try:
        parts = urlsplit(url.dsn or "")
    except ValueError as exc:  # "Invalid IPv6 URL": the URL itself is not shown, it may hold a password
        raise ConfigurationError(f"the PostgreSQL URL cannot be read: {exc}") from None
    query = parse_qsl(parts.query, keep_blank_values=True)
    given = [value for key, value in query if key == URL_PARAMETER]
    if not given:
        return url.dsn or "", PREPARE_THRESHOLD
    # %20 for a space: libpq decodes percent escapes only, never '+'
    rest = urlencode([(key, value) for key, value in query if key != URL_PARAMETER], quote_via=quote)
    return urlunsplit(parts._replace(query=rest)), prepare_threshold(given[-1])


def connection_kwargs(threshold: int | None) -> dict[str, Any]:
    """psycopg connection arguments of the pools (autocommit: ``_run_once`` sets each call's mode)."""
    from psycopg.rows import dict_row

    return {"row_factory": dict_row, "autocommit": True, "prepare_threshold": threshold}


def pin_session(conn: Any) -> None:
    """UTC and ISO for a new connection (in autocommit: one round trip, nothing left open)."""
    conn.execute(SESSION_SETTINGS)
    if not conn.autocommit:
        conn.commit()


async def pin_session_async(conn: Any) -> None:
    await conn.execute(SESSION_SETTINGS)
    if not conn.autocommit:
        await conn.commit()


FROM_URL: Any = object()  # no ``prepare_threshold`` in backend_options: the URL's, else psycopg's


def pool_settings(url: DatabaseURL, threshold: Any = FROM_URL) -> tuple[str, dict[str, Any]]:
    """The libpq URL and the pools' connection arguments; a ``backend_options`` threshold wins over the URL's."""
    conninfo, from_url = split_url(url)
    return conninfo, connection_kwargs(from_url if threshold is FROM_URL else prepare_threshold(threshold))
