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
    ["export", "--user", "u1"], ["doctor"],
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
