"""Progress of long commands: a tqdm bar with rate and ETA when stderr is a terminal (a real pty
here), one quiet line per step when it is a pipe; the command's own output is unchanged."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from navi_memory.progress import Progress

ENV = {"NAVI_MEMORY_EMBEDDINGS": "hashing"}


def cli(*args: str, db: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NAVI_MEMORY_PROGRESS"}
    proc = subprocess.run([sys.executable, "-m", "navi_memory.cli", *args, "--db", db], capture_output=True,
                          text=True, env={**env, **ENV}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def cli_on_terminal(*args: str, db: str, stdout_too: bool = False) -> tuple[str, str]:
    """stdout through a pipe (or the terminal too), stderr on a pseudo-terminal: (stdout, what the
    terminal showed)."""
    env = {k: v for k, v in os.environ.items() if k != "NAVI_MEMORY_PROGRESS"}
    main, side = pty.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a new pty is 0 columns wide
    try:
        proc = subprocess.Popen([sys.executable, "-m", "navi_memory.cli", *args, "--db", db], stdout=side if stdout_too else subprocess.PIPE,
                                stderr=side, stdin=subprocess.DEVNULL, text=True, env={**env, **ENV})
        os.close(side)
        shown = b""
        while True:  # drain while it runs: a full pty buffer would block the child
            try:
                chunk = os.read(main, 4096)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            shown += chunk
        out = proc.stdout.read() if proc.stdout else ""
        assert proc.wait(timeout=120) == 0, shown.decode()
    finally:
        os.close(main)
    return out, shown.decode("utf-8", "replace")


@pytest.fixture
def db(tmp_path):
    url = f"sqlite:///{tmp_path / 'progress.db'}"
    for n in range(3):
        cli("add", "--user", "u1", "I go climbing on Tuesday evenings", "--allow-duplicate", "--embeddings", "none",
            db=url)
    cli("add", "--user", "u1", f"my bike is blue {n}", "--embeddings", "none", db=url)
    return url


LINE = re.compile(r"^(?P<label>[a-z: ]+): (?P<count>\d+(/\d+)?) (?P<unit>\w+), [\d.]+/s, \d+s elapsed$")


def quiet_lines(stderr: str) -> dict[str, str]:
    lines = [ln for ln in stderr.splitlines() if LINE.match(ln)]
    assert "\r" not in stderr
    return {LINE.match(ln)["label"]: LINE.match(ln)["count"] for ln in lines}


def test_piped_commands_write_one_quiet_line_with_count_and_rate(db, tmp_path):
    backfill = cli("backfill", "--user", "u1", db=db)
    assert backfill.stdout.strip() == "embedded 4, failed 0, still without a vector 0"
    assert quiet_lines(backfill.stderr) == {"backfill": "4/4"}

    export = cli("export", "--user", "u1", "-o", str(tmp_path / "u1.jsonl"), db=db)
    assert quiet_lines(export.stderr) == {"export": "6"}  # user, theme(s), 4 items: the header is not counted
    assert "exported 6 records" in export.stderr

    imported = cli("import", str(tmp_path / "u1.jsonl"), "--user-map", "u1=u2", db=db)
    assert quiet_lines(imported.stderr) == {"import: checking": "7/7", "import: writing": "7/7",
                                           "import: embedding": "4/4"}
    assert imported.stdout.splitlines()[-1] == "embedded 4"

    promote = cli("promote", db=db)
    assert quiet_lines(promote.stderr) == {"promote": "2/2"}
    assert promote.stdout.startswith("2 user(s), 8 items read")


def test_nothing_to_do_writes_no_progress(db):
    cli("backfill", db=db)
    again = cli("backfill", db=db)
    assert again.stderr == ""


def test_a_terminal_gets_a_bar_with_rate_and_eta_and_stdout_stays_clean(db, tmp_path):
    out, shown = cli_on_terminal("backfill", "--user", "u1", db=db)
    assert out == "embedded 4, failed 0, still without a vector 0\n"
    assert "\r" in shown and "backfill: 100%|" in shown and "4/4 [" in shown and "items/s]" in shown
    assert re.search(r"\[\d\d:\d\d<\d\d:\d\d", shown)  # elapsed<remaining: tqdm's ETA
    out, shown = cli_on_terminal("export", "--user", "u1", "-o", str(tmp_path / "x.jsonl"), db=db)
    assert "export: 6 records [" in shown and "records/s]" in shown
    _, shown = cli_on_terminal("export", "--user", "u1", db=db, stdout_too=True)  # records on the terminal
    assert "export:" not in shown and shown.count('"type"') == 6 and "exported 6 records" in shown


def test_bench_reports_progress_the_same_way(tmp_path):
    args = ["bench", "latency", "--n", "300", "--queries", "4", "--warmup", "1", "--dim", "8", "--batch", "100",
            "--users", "3"]
    piped = cli(*args, db=f"sqlite:///{tmp_path / 'unused.db'}")
    assert "\r" not in piped.stderr
    assert re.search(r"ingest: 300/300 items, [\d.]+/s", piped.stderr), piped.stderr


def test_the_line_names_the_time_left_while_work_remains(monkeypatch):
    monkeypatch.setenv("NAVI_MEMORY_PROGRESS", "lines")
    stream = io.StringIO()
    progress = Progress("embed", 10, stream=stream)
    progress(5)
    assert re.fullmatch(r"embed: 5/10 items, [\d.]+/s, 0s elapsed, about \d+s left", progress.line_text())
    progress(10)
    progress.close()
    progress.close()  # once only
    assert stream.getvalue().count("\n") == 1 and "left" not in stream.getvalue()
    monkeypatch.setenv("NAVI_MEMORY_PROGRESS", "off")
    quiet = Progress("embed", 10, stream=stream)
    quiet(10)
    quiet.close()
    assert stream.getvalue().count("\n") == 1
