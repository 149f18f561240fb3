"""No process outlives the suite: what a test session started and is still running at its end.

Two kinds are found: descendants of the pytest process (subprocesses, multiprocessing workers,
browser drivers) and PostgreSQL servers started through pgserver by this process (pg_ctl detaches
them, so they are not descendants; pgserver lists the processes holding a handle on a server in
``<pgdata>/.handle_pids.json``). The session fixture in conftest.py stops any it finds and fails.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

# Python's own helpers, started on the first spawn-context Queue/Barrier and ended when Python exits
PYTHON_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def _cmdline(proc: Any) -> list[str]:
    import psutil

    try:
        return proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []


def _running(proc: Any) -> bool:
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pgdata(cmdline: list[str]) -> Path | None:
    """The data directory of a postmaster (``postgres -D <dir> ...``); None for anything else."""
    if not cmdline or Path(cmdline[0]).name != "postgres" or "-D" not in cmdline[:-1]:
        return None
    return Path(cmdline[cmdline.index("-D") + 1])


def _handle_pids(pgdata: Path) -> list[int]:
    try:
        return [int(pid) for pid in json.loads((pgdata / ".handle_pids.json").read_text())]
    except (OSError, ValueError, TypeError):
        return []


def left_behind() -> list[Any]:
    """The processes this session started that still run (none expected after every teardown)."""
    import psutil

    me = psutil.Process()
    found = {p.pid: p for p in me.children(recursive=True)
             if _running(p) and not any(helper in " ".join(_cmdline(p)) for helper in PYTHON_HELPERS)}
    for proc in psutil.process_iter():
        pgdata = _pgdata(_cmdline(proc))
        if pgdata is not None and me.pid in _handle_pids(pgdata) and _running(proc):
            found[proc.pid] = proc
    return list(found.values())


def describe(procs: list[Any]) -> str:
    return "; ".join(f"pid {p.pid}: {' '.join(_cmdline(p))[:160]}" for p in procs)


def stop(procs: list[Any]) -> None:
    """End them: a postmaster by a fast shutdown (SIGINT: it ends its backends), others by SIGTERM,
    then SIGKILL what is still there after 10 s."""
    import psutil

    for proc in procs:
        try:
            proc.send_signal(signal.SIGINT if _pgdata(_cmdline(proc)) is not None else signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=10)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


def interrupt_on_sigterm() -> None:
    """A SIGTERM (``timeout``, a CI runner giving up) ends the run as Ctrl-C does: pytest then runs
    every fixture's teardown, so the servers the suite started are stopped and their folders deleted
    (by default Python dies at once and leaves them running)."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # a handler of the caller's own stays
        signal.signal(signal.SIGTERM, _raise_interrupt)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
