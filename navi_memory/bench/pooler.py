"""PgBouncer in transaction mode in front of a PostgreSQL server: for the benchmarks and the tests.

The machine's ``pgbouncer`` program (Debian's package) listens on a free loopback port; every
database of the server is reachable through it (the ``*`` wildcard). Settings as docs/scaling.md
advises ("A pooler in front"). PgBouncer refuses to run as root: it then runs as the owner of the
server's socket folder (pgserver runs PostgreSQL as its own user, in a folder only that user may
enter), or ``nobody``. It runs in the foreground, a child of the caller, so a check for processes
left running finds it if the caller ever fails to stop it. A store's URL needs ``POOLED``
(``?prepare_threshold=none``: PgBouncer before 1.21 keeps no prepared statements).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..errors import ConfigurationError

PROGRAMS = ("pgbouncer", "/usr/sbin/pgbouncer")
START_TIMEOUT = 10.0
POOLED = "?prepare_threshold=none"  # a store's URL through PgBouncer before 1.21 (docs/scaling.md)
SETTINGS = {
    "pool_mode": "transaction",
    "max_client_conn": "500",
    "listen_addr": "127.0.0.1",
    "unix_socket_dir": "",
    "auth_type": "trust",
}


class PoolerMissing(ConfigurationError):
    """No ``pgbouncer`` program on this machine."""


def program() -> str | None:
    for name in PROGRAMS:
        found = shutil.which(name)
        if found:
            return found
    return None


def version() -> tuple[int, ...]:
    """The installed PgBouncer's version, e.g. (1, 18, 0); () without one."""
    found = program()
    if found is None:
        return ()
    out = subprocess.run([found, "--version"], capture_output=True, text=True, check=True).stdout
    return tuple(int(part) for part in out.splitlines()[0].split()[-1].split("."))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_address(url: str) -> dict[str, str]:
    """host, port, user and password of a PostgreSQL URL (a socket folder as host is kept)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    found = {"host": query.get("host") or parts.hostname or "127.0.0.1",
             "port": query.get("port") or str(parts.port or 5432),
             "user": query.get("user") or parts.username or os.environ.get("USER", "postgres")}
    password = query.get("password") or parts.password
    if password:
        found["password"] = password
    return found


def _run_as(host: str) -> dict[str, Any]:
    """Popen's user arguments: none unless root; then the owner of the socket folder, else nobody."""
    if os.geteuid() != 0:
        return {}
    import pwd

    owner = os.stat(host).st_uid if host.startswith("/") and os.path.isdir(host) else None
    entry = pwd.getpwuid(owner) if owner not in (None, 0) else pwd.getpwnam("nobody")
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


@dataclass
class PgBouncer:
    port: int
    user: str
    folder: Path
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, server_url: str, pool_size: int) -> "PgBouncer":
        """PgBouncer in front of the server of ``server_url``, ``pool_size`` server connections per
        database and user. Raises ``PoolerMissing`` without the program."""
        found = program()
        if found is None:
            raise PoolerMissing("pgbouncer is not installed (apt-get install pgbouncer)")
        server = _server_address(server_url)
        run_as = _run_as(server["host"])
        folder = Path(tempfile.mkdtemp(prefix="navi-pgbouncer-"))
        if run_as:
            os.chown(folder, run_as["user"], run_as["group"])
        (folder / "users.txt").write_text(f'"{server["user"]}" ""\n')
        target = " ".join(f"{k}={v}" for k, v in server.items())
        for attempt in range(3):  # the free port may be taken between the probe and the bind
            port = _free_port()
            settings = {**SETTINGS, "default_pool_size": str(pool_size), "listen_port": str(port),
                        "auth_file": str(folder / "users.txt"), "logfile": str(folder / "pgbouncer.log")}
            (folder / "pgbouncer.ini").write_text(
                f"[databases]\n* = {target}\n\n[pgbouncer]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items()))
            for name in ("pgbouncer.ini", "users.txt"):
                os.chmod(folder / name, 0o644)
            process = subprocess.Popen([found, "-q", str(folder / "pgbouncer.ini")], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, **run_as)
            bouncer = cls(port, server["user"], folder, process)
            if bouncer._wait_listening():
                return bouncer
            bouncer.stop(remove=False)
            log = bouncer.log()
            if "Address already in use" not in log or attempt == 2:
                shutil.rmtree(folder, ignore_errors=True)
                raise RuntimeError(f"pgbouncer did not start; its log:\n{log[-3000:]}")
        raise AssertionError("unreachable")

    def _wait_listening(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                time.sleep(0.05)
        return False

    def url(self, database: str) -> str:
        """A libpq URL of ``database`` through the pooler (navi-memory's store needs ``POOLED``
        added, psycopg alone does not)."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        try:
            return (self.folder / "pgbouncer.log").read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, remove: bool = True) -> None:
        """SIGTERM: PgBouncer's immediate shutdown (every client of it has ended)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if remove:
            shutil.rmtree(self.folder, ignore_errors=True)
