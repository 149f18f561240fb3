"""A PostgreSQL 16 primary and a streaming replica for the tests (tests/test_replica.py).

Both run pgserver's binaries (PostgreSQL 16 + pgvector): the primary from ``initdb``, the replica from
``pg_basebackup -R`` of it (a hot standby on another loopback port). The way the servers are run is
``scripts/citus_cluster.py``'s (as ``nobody`` when root, each data folder listing this process in
``.handle_pids.json`` for the suite's check of processes left running).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from .citus import cluster_module

SETTINGS = {"listen_addresses": "127.0.0.1", "unix_socket_directories": "", "wal_level": "replica",
            "max_wal_senders": "4", "hot_standby": "on", "wal_writer_delay": "10ms",
            # a throwaway pair never survives a crash of its machine: no flush to disk per commit
            "fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class ReplicaPair:
    """``primary_url`` and ``replica_url`` (database ``postgres``); ``stop()`` ends both, deletes all."""

    def __init__(self) -> None:
        self.cc = cluster_module()
        pgserver = pytest.importorskip("pgserver", reason="the replica pair runs pgserver's PostgreSQL")
        self.base = Path(tempfile.mkdtemp(prefix="navi-replica-"))
        self.base.chmod(0o755)
        self.install = Path(pgserver.__file__).parent.parent  # holds pgserver/pginstall and pgserver.libs
        self.ports: dict[str, int] = {}

    @classmethod
    def start(cls) -> "ReplicaPair":
        pair = cls()
        try:
            if os.geteuid() == 0:  # the package may sit in a home the server's user cannot enter
                for part in ("pgserver/pginstall", "pgserver.libs"):
                    pair.cc._link_tree(pair.install / part, pair.base / "install" / part)
                pair.install = pair.base / "install"
            primary = pair._folder("primary")
            pair._run("initdb", "-D", str(primary), "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync")
            pair._configure(primary, "primary")
            pair._run("pg_ctl", "-D", str(primary), "-l", str(primary / "server.log"), "-w", "start")
            pair._register(primary)
            pair.sql("primary", "CREATE EXTENSION IF NOT EXISTS vector")
            replica = pair._folder("replica")
            pair._run("pg_basebackup", "-h", "127.0.0.1", "-p", str(pair.ports["primary"]), "-U", "postgres",
                      "-D", str(replica), "-R", "-X", "stream", "--no-sync")
            pair._configure(replica, "replica")
            pair.start_replica()
        except BaseException:
            pair.stop()
            raise
        return pair

    def url(self, name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.ports[name]}/postgres"

    def sql(self, name: str, statement: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url(name), autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(statement)
            return cur.fetchall() if cur.description else []

    def wait_replayed(self, timeout: float = 30.0) -> None:
        """Until the replica has replayed everything the primary wrote so far."""
        target = self.sql("primary", "SELECT pg_current_wal_insert_lsn()")[0][0]
        deadline = time.monotonic() + timeout
        while not self.sql("replica", f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn")[0][0]:
            assert time.monotonic() < deadline, "the replica did not catch up"
            time.sleep(0.05)

    def start_replica(self) -> None:
        replica = self.base / "replica"
        self._run("pg_ctl", "-D", str(replica), "-l", str(replica / "server.log"), "-w", "start")
        self._register(replica)

    def stop_replica(self) -> None:
        self._run("pg_ctl", "-D", str(self.base / "replica"), "-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        for name in ("replica", "primary"):
            pgdata = self.base / name
            if (pgdata / "postmaster.pid").exists():
                try:
                    self._run("pg_ctl", "-D", str(pgdata), "-m", "immediate", "-w", "stop")
                except subprocess.CalledProcessError:
                    self.cc._kill_postmaster(pgdata)
        shutil.rmtree(self.base, ignore_errors=True)

    def _folder(self, name: str) -> Path:
        pgdata = self.base / name
        pgdata.mkdir(mode=0o700)
        self.cc._chown(pgdata)
        self.ports[name] = self.cc._free_port()
        return pgdata

    def _configure(self, pgdata: Path, name: str) -> None:
        with open(pgdata / "postgresql.conf", "a") as conf:  # later lines win over earlier ones
            settings = {**SETTINGS, "port": str(self.ports[name])}
            conf.write("".join(f"{key} = '{value}'\n" for key, value in settings.items()))

    def _register(self, pgdata: Path) -> None:
        (pgdata / ".handle_pids.json").write_text(json.dumps([os.getpid()]))

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.install / "pgserver" / "pginstall" / "bin" / program), *args]
        env = {**os.environ, "LD_LIBRARY_PATH": self.cc._library_path(self.install)}
        with tempfile.TemporaryFile("w+") as out:  # pg_ctl's server keeps its output open: never a pipe
            run = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=self.base,
                                 **self.cc._user_kwargs())
            if run.returncode:
                out.seek(0)
                raise subprocess.CalledProcessError(run.returncode, command, out.read())
