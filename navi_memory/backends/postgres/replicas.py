"""Read replicas for the PostgreSQL backend (``backend_options={"replica_urls": [...]}``).

Operations marked ``reads`` go to a streaming replica (round robin over those not marked down);
every other call, and migrations, go to the primary. Read-your-writes per backend instance: after
each call on the primary the backend keeps the primary's WAL insert position (read in the same
round trip as the COMMIT), and a replica serves a read only once its replayed position has
reached it (``pg_last_wal_replay_lsn()``, asked only while the replica is not known to be far
enough); otherwise the read runs on the primary. A replica that cannot be reached (a refused or
timed-out connection, a connection it closed) is skipped for ``replica_retry`` seconds and the call
runs on the primary; any other error on a replica (a query cancelled by a recovery conflict, a
statement a standby refuses) also reruns the call on the primary, which then reports its own error.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import psycopg
from psycopg_pool import PoolTimeout

from ...config import DatabaseURL, parse_url
from ...errors import ValidationError

log = logging.getLogger(__name__)

REPLICA_OPTIONS = ("replica_urls", "replica_retry", "replica_timeout")
REPLICA_RETRY = 5.0  # seconds a replica that could not be reached is skipped
REPLICA_TIMEOUT = 2.0  # seconds to wait for a replica's connection before reading from the primary
# whether the call wrote, its COMMIT, the primary's WAL insert position after it: one round trip
COMMIT_AND_POSITION = ("SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS wrote; COMMIT;"
                       " SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn AS lsn")
# a replica's replayed position; NULL on a server not in recovery (then it has all it ever will)
REPLAYED = "SELECT pg_last_wal_replay_lsn() - '0/0'::pg_lsn AS lsn"
CURRENT = 2 ** 64  # the position of a server that is not a standby
ON_PRIMARY = object()  # what a read no replica could serve returns


@dataclass
class Replica:
    url: DatabaseURL
    pool: Any = None
    replayed: int = 0  # the highest replayed WAL position seen on it
    down_until: float = 0.0  # monotonic time before which it is skipped
    suspect: bool = False  # it failed: check its idle connections before the next use


@dataclass
class Replicas:
    """The replicas of one backend and the routing state: which is next, which are down."""

    members: list[Replica] = field(default_factory=list)
    retry: float = REPLICA_RETRY
    timeout: float = REPLICA_TIMEOUT
    turn: int = 0
    written: int = 0  # the primary's WAL position after this backend's last call there
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def wrote(self, position: int) -> None:
        with self.lock:  # calls of several threads: the position only moves forward
            self.written = max(self.written, position)

    def pick(self) -> Replica | None:
        """The next replica not marked down (round robin), or None: read from the primary."""
        now = time.monotonic()
        for _ in range(len(self.members)):
            replica = self.members[self.turn % len(self.members)]
            self.turn += 1
            if replica.down_until <= now:
                return replica
        return None

    def failed(self, replica: Replica, exc: BaseException) -> None:
        """An error on ``replica``: unreachable ones are skipped for ``retry`` seconds."""
        if unreachable(exc):
            replica.down_until = time.monotonic() + self.retry
            replica.suspect = True
            log.warning("read replica %s unreachable (%s); reading from the primary for %.0f s",
                        where(replica.url), first_line(exc), self.retry)
        else:
            log.info("read on replica %s failed (%s); running it on the primary", where(replica.url), first_line(exc))


def take_options(tuning: dict[str, Any]) -> Replicas:
    """The replica options removed from ``tuning`` (the backend's keyword options)."""
    urls: Sequence[str] = tuning.pop("replica_urls", None) or ()
    if isinstance(urls, str):
        raise ValidationError("replica_urls must be a list of PostgreSQL URLs, not one string")
    members = []
    for raw in urls:
        url = parse_url(raw)
        if url.scheme != "postgresql":
            raise ValidationError(f"a replica URL must be a PostgreSQL URL, not {raw!r}")
        members.append(Replica(url))
    retry = tuning.pop("replica_retry", None)
    timeout = tuning.pop("replica_timeout", None)
    return Replicas(members, REPLICA_RETRY if retry is None else float(retry),
                    REPLICA_TIMEOUT if timeout is None else float(timeout))


def unreachable(exc: BaseException) -> bool:
    """A replica that could not be reached or cannot serve now (not an error of the statement)."""
    if isinstance(exc, PoolTimeout):
        return True
    sqlstate = getattr(exc, "sqlstate", None)
    return isinstance(exc, psycopg.OperationalError) and (sqlstate is None or sqlstate.startswith(("08", "53", "57P")))


def position(rows: list[dict[str, Any]]) -> int:
    value = rows[0]["lsn"] if rows else None
    return CURRENT if value is None else int(value)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def where(url: DatabaseURL) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url.dsn or "")
    return f"{parts.hostname or 'local socket'}{':' + str(parts.port) if parts.port else ''}"


def open_pools(replicas: Replicas, settings: Any, max_size: int, configure: Any) -> None:
    """A pool per replica (``settings(url)``: its libpq URL and connection arguments, as the
    primary's), opened without waiting: a replica down at start is skipped, not fatal."""
    from psycopg_pool import ConnectionPool

    for replica in replicas.members:
        conninfo, kwargs = settings(replica.url)
        replica.pool = ConnectionPool(conninfo, min_size=1, max_size=max_size, open=False,
                                      kwargs=kwargs, configure=configure,
                                      timeout=replicas.timeout, name=f"navi-memory-replica-{where(replica.url)}")
        replica.pool.open(wait=False)


async def open_pools_async(replicas: Replicas, settings: Any, max_size: int, configure: Any) -> None:
    """``open_pools`` for the async backend."""
    from psycopg_pool import AsyncConnectionPool

    for replica in replicas.members:
        conninfo, kwargs = settings(replica.url)
        replica.pool = AsyncConnectionPool(conninfo, min_size=1, max_size=max_size, open=False,
                                           kwargs=kwargs, configure=configure,
                                           timeout=replicas.timeout, name=f"navi-memory-replica-{where(replica.url)}")
        await replica.pool.open(wait=False)
