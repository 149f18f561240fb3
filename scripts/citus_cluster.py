"""A throwaway Citus cluster on loopback ports, for the tests and benchmarks (never imported by the package).

Citus (AGPL-3.0, used here only as a server binary) is built from its source tarball against the
PostgreSQL 16 + pgvector that the ``pgserver`` package ships, once per machine: the result is cached in
``$NAVI_MEMORY_CACHE`` (default ``~/.cache/navi-memory``) under a folder named by the Citus and
PostgreSQL versions, built under a file lock so two test processes never build at once.

    python scripts/citus_cluster.py build             # build if missing: exit 0, 2 if impossible here, 1 failed
    python scripts/citus_cluster.py start --workers 2 # start a cluster, print its URL, stop on Ctrl-C

Each node is its own ``initdb`` folder under one temporary directory, listening on 127.0.0.1 only with
trust authentication; as root the servers run as ``nobody`` (PostgreSQL refuses root). Each data folder
lists the starting process in ``.handle_pids.json`` (as pgserver does), so the test suite's check for
processes left running finds a server a crash left behind.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

CITUS_VERSION = "13.2.2"
ROOT = Path(__file__).resolve().parent.parent
SOURCE_ENV = "NAVI_MEMORY_CITUS_SOURCE"
TARBALL = f"citus-{CITUS_VERSION}.tar.gz"
# where the workspace keeps vendored sources: beside the checkout (or beside its worktrees folder)
SOURCE_FOLDERS = [ROOT.parent / "shared" / "vendor", ROOT.parent.parent / "shared" / "vendor"]
RUN_AS = "nobody"
START_TIMEOUT = 60


class BuildImpossible(RuntimeError):
    """This machine lacks what the build needs (a compiler, make, pgserver, the source): tests skip."""


class BuildFailed(RuntimeError):
    """The build ran and failed: a real error, never a reason to skip."""


def cache_root() -> Path:
    return Path(os.environ.get("NAVI_MEMORY_CACHE") or Path.home() / ".cache" / "navi-memory")


def _pgserver_install() -> tuple[Path, Path]:
    """pgserver's PostgreSQL folder and the folder of the libraries its programs link (auditwheel's)."""
    try:
        import pgserver
    except ImportError as exc:
        raise BuildImpossible("the pgserver package (PostgreSQL 16 + pgvector) is not installed") from exc
    package = Path(pgserver.__file__).parent
    return package / "pginstall", package.parent / "pgserver.libs"


def _pg_version(pginstall: Path) -> str:
    out = subprocess.run([str(pginstall / "bin" / "pg_config"), "--version"], capture_output=True, text=True,
                         check=True).stdout
    return out.split()[-1]  # "PostgreSQL 16.2"


def source_tarball() -> Path:
    candidates = [Path(os.environ[SOURCE_ENV])] if os.environ.get(SOURCE_ENV) else \
        [folder / TARBALL for folder in SOURCE_FOLDERS]
    for path in candidates:
        if path.is_file():
            return path
    raise BuildImpossible(f"no Citus source: {' or '.join(map(str, candidates))} (set {SOURCE_ENV})")


def install_dir() -> Path:
    pginstall, _ = _pgserver_install()
    return cache_root() / f"citus-{CITUS_VERSION}-pg{_pg_version(pginstall)}"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _library_path(install: Path) -> str:
    return f"{install / 'pgserver.libs'}:{install / 'pgserver' / 'pginstall' / 'lib'}"


def build() -> Path:
    """The cached install (pgserver's PostgreSQL with Citus added), built first if missing. Returns the
    folder holding ``pgserver/pginstall`` and ``pgserver.libs`` (the layout its programs' rpath expects)."""
    pginstall, libs = _pgserver_install()
    target = install_dir()
    done = target / ".built"
    if done.exists():
        return target
    tarball = source_tarball()
    missing = [tool for tool in ("gcc", "make") if shutil.which(tool) is None]
    if missing:
        raise BuildImpossible(f"building Citus needs {' and '.join(missing)}, not found on PATH")
    with _locked(target.with_name(target.name + ".lock")):
        if done.exists():  # another process built it while this one waited
            return target
        started = time.monotonic()
        shutil.rmtree(target, ignore_errors=True)  # what an interrupted build left
        shutil.copytree(pginstall, target / "pgserver" / "pginstall", symlinks=True)
        shutil.copytree(libs, target / "pgserver.libs", symlinks=True)
        _compile(tarball, target)
        done.write_text(json.dumps({"seconds": round(time.monotonic() - started, 1), "source": str(tarball)}))
    return target


def _compile(tarball: Path, target: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="navi-citus-build-") as work:
        with tarfile.open(tarball) as archive:
            archive.extractall(work, filter="data")
        source = Path(work) / f"citus-{CITUS_VERSION}"
        env = {**os.environ, "LD_LIBRARY_PATH": _library_path(target)}
        pg_config = target / "pgserver" / "pginstall" / "bin" / "pg_config"
        jobs = str(os.cpu_count() or 2)
        steps = [["./configure", "--without-libcurl", "--without-lz4", "--without-zstd", f"PG_CONFIG={pg_config}"],
                 ["make", f"-j{jobs}", "with_llvm=no"], ["make", "install", "with_llvm=no"]]
        log_path = target / "build.log"
        with open(log_path, "w") as out:
            for step in steps:
                run = subprocess.run(step, cwd=source, env=env, stdout=out, stderr=subprocess.STDOUT)
                if run.returncode:
                    tail = "".join(log_path.read_text().splitlines(keepends=True)[-30:])
                    raise BuildFailed(f"{' '.join(step)} failed (exit {run.returncode}); end of {log_path}:\n{tail}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Node:
    name: str
    port: int
    pgdata: Path

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


@dataclass
class CitusCluster:
    """A coordinator and its workers; ``stop()`` ends every server and deletes every folder."""

    install: Path
    base: Path
    settings: dict[str, str]
    coordinator: Node | None = None
    workers: list[Node] = field(default_factory=list)

    @classmethod
    def start(cls, workers: int = 2, settings: dict[str, str] | None = None) -> "CitusCluster":
        """Build if missing, then start ``workers`` workers and a coordinator that knows them.
        ``settings``: extra server settings for every node (e.g. ``citus.shard_count``)."""
        install = build()
        base = Path(tempfile.mkdtemp(prefix="navi-citus-"))
        base.chmod(0o755)
        cluster = cls(install, base, dict(settings or {}))
        try:
            if _as_other_user():  # the cache may sit in a home the server's user cannot enter
                cluster.install = base / "install"
                _link_tree(install, cluster.install)
            names = ["coordinator", *(f"worker{n}" for n in range(1, workers + 1))]
            with ThreadPoolExecutor(len(names)) as pool:
                nodes = list(pool.map(cluster._start_node, names))
            cluster.coordinator, cluster.workers = nodes[0], nodes[1:]
            cluster.sql(cluster.coordinator, "SELECT citus_set_coordinator_host('127.0.0.1', %s)",
                        cluster.coordinator.port)
            for worker in cluster.workers:
                cluster.sql(cluster.coordinator, "SELECT citus_add_node('127.0.0.1', %s)", worker.port)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    @property
    def url(self) -> str:
        assert self.coordinator is not None
        return self.coordinator.url

    def add_worker(self) -> Node:
        """Start one more worker and register it (its shards come with ``citus_rebalance_start()``)."""
        assert self.coordinator is not None
        node = self._start_node(f"worker{len(self.workers) + 1}")
        self.workers.append(node)
        self.sql(self.coordinator, "SELECT citus_add_node('127.0.0.1', %s)", node.port)
        return node

    def sql(self, node: Node, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(node.url, autocommit=True) as conn:
            cur = conn.execute(statement, params or None)
            return cur.fetchall() if cur.description else []

    def _start_node(self, name: str) -> Node:
        pgdata = self.base / name
        pgdata.mkdir(mode=0o700)
        _chown(pgdata)
        self._run("initdb", "-D", str(pgdata), "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync")
        for attempt in range(3):  # a port taken between choosing it and binding it: choose again
            node = Node(name, _free_port(), pgdata)
            with open(pgdata / "postgresql.conf", "a") as conf:  # later lines win over earlier ones
                conf.write("".join(f"{key} = '{value}'\n" for key, value in self._settings(node).items()))
            try:
                self._run("pg_ctl", "-D", str(pgdata), "-l", str(pgdata / "server.log"), "-w",
                          "-t", str(START_TIMEOUT), "start")
                break
            except subprocess.CalledProcessError:
                if attempt == 2 or "could not bind" not in _read(pgdata / "server.log"):
                    raise RuntimeError(f"{name} did not start; its log:\n{_read(pgdata / 'server.log')[-3000:]}")
        (pgdata / ".handle_pids.json").write_text(json.dumps([os.getpid()]))
        for extension in ("citus", "vector"):
            self.sql(node, f"CREATE EXTENSION IF NOT EXISTS {extension}")
        return node

    def _settings(self, node: Node) -> dict[str, str]:
        return {"shared_preload_libraries": "citus", "listen_addresses": "127.0.0.1", "port": str(node.port),
                "unix_socket_directories": "", "max_connections": "300",
                # logical: Citus moves shards (rebalancing) by logical replication
                "wal_level": "logical",
                # a throwaway cluster never survives a crash of its machine: no flush to disk per commit
                "fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
                **self.settings}

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.install / "pgserver" / "pginstall" / "bin" / program), *args]
        env = {**os.environ, "LD_LIBRARY_PATH": _library_path(self.install)}
        # pg_ctl's server keeps the output files open: a file, never a pipe read to its end
        with tempfile.TemporaryFile("w+") as out:
            run = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=self.base,
                                 **_user_kwargs())
            if run.returncode:
                out.seek(0)
                raise subprocess.CalledProcessError(run.returncode, command, out.read())

    def stop(self) -> None:
        for node in [*self.workers, *([self.coordinator] if self.coordinator else [])]:
            try:
                self._run("pg_ctl", "-D", str(node.pgdata), "-m", "fast", "-w", "-t", str(START_TIMEOUT), "stop")
            except subprocess.CalledProcessError:
                _kill_postmaster(node.pgdata)
        self.workers, self.coordinator = [], None
        shutil.rmtree(self.base, ignore_errors=True)


def _as_other_user() -> bool:
    return os.geteuid() == 0


def _user_kwargs() -> dict[str, Any]:
    if not _as_other_user():
        return {}
    import pwd

    entry = pwd.getpwnam(RUN_AS)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _chown(path: Path) -> None:
    if _as_other_user():
        import pwd

        entry = pwd.getpwnam(RUN_AS)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _link_tree(source: Path, target: Path) -> None:
    """A copy of the install the server's user can reach: hard links where the file system allows."""
    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, symlinks=True, copy_function=link,
                    ignore=shutil.ignore_patterns("include", "build.log"))
    for folder, _, _ in os.walk(target):
        os.chmod(folder, 0o755)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _kill_postmaster(pgdata: Path) -> None:
    try:
        pid = int(_read(pgdata / "postmaster.pid").splitlines()[0])
        os.kill(pid, 9)
    except (IndexError, ValueError, ProcessLookupError):
        pass


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build Citus into the cache if missing")
    start = commands.add_parser("start", help="start a cluster, print its URL, stop it on Ctrl-C")
    start.add_argument("--workers", type=int, default=2)
    start.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                       help="a server setting for every node, e.g. citus.shard_count=8")
    args = parser.parse_args(argv)
    if args.command == "build":
        started = time.monotonic()
        try:
            path = build()
        except (BuildImpossible, BuildFailed) as exc:
            print(f"citus build: {exc}", file=sys.stderr)
            return 2 if isinstance(exc, BuildImpossible) else 1
        print(f"citus build: {path} ({time.monotonic() - started:.1f} s)", file=sys.stderr)
        return 0
    signal.signal(signal.SIGTERM, _interrupt)  # `kill <pid>` stops the servers too
    cluster = CitusCluster.start(workers=args.workers, settings=dict(s.split("=", 1) for s in args.set))
    print(cluster.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
