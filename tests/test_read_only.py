"""Read-only commands and opens create nothing: no SQLite file or folder, no PostgreSQL table."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from navi_memory import AsyncMemoryStore, MemoryStore, SchemaError
from navi_memory.cli import main

READ_COMMANDS = [
    ["users"], ["search", "--user", "u1", "coffee"], ["list", "--user", "u1"], ["themes", "--user", "u1"],
    ["facts", "--user", "u1"], ["fact", "list", "--user", "u1"], ["summary", "--user", "u1"], ["stats"],
    ["export", "--user", "u1"],
]


def tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables"
                                           " WHERE table_schema = current_schema() ORDER BY 1")]


@pytest.fixture
def empty_db(backend_name, tmp_path, request):
    """A database without the schema, and a function telling what it holds now."""
    if backend_name == "sqlite":
        path = tmp_path / "missing" / "dir" / "memory.db"
        yield f"sqlite:///{path}", lambda: sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
        return
    server = request.getfixturevalue("postgres_server")
    url = server.fresh_schema_url()
    yield url, lambda: tables(url)
    server.drop_schema(url)


@pytest.mark.parametrize("argv", READ_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_read_command_on_a_database_without_the_schema_exits_2_and_creates_nothing(empty_db, argv, capsys):
    url, contents = empty_db
    before = contents()
    code = main(["--db", url, "--embeddings", "none", *argv])
    out, err = capsys.readouterr()
    assert code == 2 and "schema" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1
    assert "nothing was changed" not in out  # the error is said once (doctor prints its report first)
    assert contents() == before


def test_doctor_on_a_database_without_the_schema_says_nothing_is_stored_and_creates_nothing(empty_db, capsys):
    url, contents = empty_db
    before = contents()
    code = main(["--db", url, "--embeddings", "none", "doctor"])
    out, err = capsys.readouterr()
    assert code == 0 and not err and "none yet: nothing is stored" in out
    assert contents() == before


def test_a_read_only_open_creates_nothing_and_says_why(empty_db):
    url, contents = empty_db
    before = contents()
    with pytest.raises(SchemaError, match="nothing was"):
        MemoryStore.open(url, embeddings=False, read_only=True)
    assert contents() == before


async def test_an_async_read_only_open_creates_nothing(empty_db):
    url, contents = empty_db
    before = contents()
    with pytest.raises(SchemaError):
        await AsyncMemoryStore.open(url, embeddings=False, read_only=True)
    assert contents() == before


def test_a_read_only_open_of_a_current_schema_reads(db_url, capsys):
    with MemoryStore.open(db_url, embeddings=False) as store:
        store.add(user_id="u1", content="I drink oat milk lattes")
    with MemoryStore.open(db_url, embeddings=False, read_only=True) as store:
        assert [i.content for i in store.list_items(user_id="u1")] == ["I drink oat milk lattes"]
    assert main(["--db", db_url, "--embeddings", "none", "search", "--user", "u1", "lattes"]) == 0
    assert "oat milk" in capsys.readouterr().out
    assert main(["--db", db_url, "--embeddings", "none", "doctor"]) == 0


def test_migrate_still_creates_the_schema(empty_db, capsys):
    url, _ = empty_db
    assert main(["--db", url, "--embeddings", "none", "migrate"]) == 0
    assert main(["--db", url, "--embeddings", "none", "users"]) == 0


def test_a_failed_export_keeps_the_existing_backup(db_url, tmp_path, capsys):
    with MemoryStore.open(db_url, embeddings=False) as store:
        store.add(user_id="u1", content="note")
    backup = tmp_path / "backup.jsonl"
    backup.write_text("the old backup\n")
    assert main(["--db", db_url, "--embeddings", "none", "export", "--user", "nobody", "-o", str(backup)]) == 2
    assert backup.read_text() == "the old backup\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []
    assert main(["--db", db_url, "--embeddings", "none", "export", "--user", "u1", "-o", str(backup)]) == 0
    assert '"note"' in backup.read_text() or "note" in backup.read_text()
    missing = tmp_path / "no" / "such" / "dir" / "out.jsonl"
    assert main(["--db", db_url, "--embeddings", "none", "export", "--user", "u1", "-o", str(missing)]) == 2
    assert "does not exist" in capsys.readouterr().err and not missing.parent.exists()


def test_an_export_through_a_symbolic_link_replaces_the_file_it_names(db_url, tmp_path):
    with MemoryStore.open(db_url, embeddings=False) as store:
        store.add(user_id="u1", content="my locker code is 4412")
    (tmp_path / "disk").mkdir()
    real = tmp_path / "disk" / "backup.jsonl"
    real.write_text("the old backup\n")
    real.chmod(0o640)
    link = tmp_path / "backup.jsonl"
    link.symlink_to(real)
    assert main(["--db", db_url, "--embeddings", "none", "export", "--user", "u1", "-o", str(link)]) == 0
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert "4412" in real.read_text() and (real.stat().st_mode & 0o777) == 0o640
    dangling = tmp_path / "new.jsonl"
    dangling.symlink_to(tmp_path / "disk" / "new-backup.jsonl")  # names a file not made yet
    assert main(["--db", db_url, "--embeddings", "none", "export", "--user", "u1", "-o", str(dangling)]) == 0
    assert dangling.is_symlink() and "4412" in (tmp_path / "disk" / "new-backup.jsonl").read_text()
    assert not [p for p in tmp_path.rglob("*.partial")]
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    assert main(["--db", db_url, "--embeddings", "none", "export", "--user", "u1", "-o", str(tmp_path / "loop-a")]) == 2


KILLED_EXPORT = """
import sys, time
from navi_memory.cli.io import _write_whole

def write(out):
    out.write("half a backup\\n")
    out.flush()
    print("writing", flush=True)
    time.sleep(60)

_write_whole(sys.argv[1], write)
"""


def test_a_killed_exports_partial_file_is_private_and_cleaned(tmp_path, capsys):
    """`export -o` killed mid-write leaves its temporary file readable by its owner only, and the next
    export to the same target removes it; a live export's temporary file is left alone."""
    import os
    import signal
    import stat
    import subprocess
    import sys

    db = f"sqlite:///{tmp_path / 'memory.db'}"
    with MemoryStore.open(db, embeddings=False) as store:
        store.add(user_id="u1", content="my locker code is 4412")
    backup = tmp_path / "backup.jsonl"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    writer = subprocess.Popen([sys.executable, "-c", KILLED_EXPORT, str(backup)], stdout=subprocess.PIPE, env=env,
                              text=True)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        [left] = [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]
        assert left.name.startswith(f".backup.jsonl.{writer.pid}.") and left.read_text() == "half a backup\n"
        assert stat.S_IMODE(left.stat().st_mode) == 0o600 and not backup.exists()
        running = tmp_path / f".backup.jsonl.{live.pid}.feedcafe.partial"
        running.write_text("another export, still writing\n")
        other = tmp_path / f".other.jsonl.{writer.pid}.feedcafe.partial"  # another target's: not this export's
        other.write_text("x\n")
        assert main(["--db", db, "--embeddings", "none", "export", "--user", "u1", "-o", str(backup)]) == 0
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")) == sorted(
            [running.name, other.name])
        assert "4412" in backup.read_text() and stat.S_IMODE(backup.stat().st_mode) == 0o600
        backup.chmod(0o640)  # an existing backup keeps the mode its owner gave it
        assert main(["--db", db, "--embeddings", "none", "export", "--user", "u1", "-o", str(backup)]) == 0
        assert stat.S_IMODE(backup.stat().st_mode) == 0o640
    finally:
        for proc in (writer, live):
            proc.kill()
            proc.wait(timeout=30)
