"""One user's rows, read straight from the database (both backends), for isolation checks."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def _sqlite_user_rows(path: Path, user: str) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = {}
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            column = "user_id" if "user_id" in columns else ("id" if table == "users" else None)
            if column:
                rows = conn.execute(f'SELECT * FROM "{table}" WHERE "{column}" = ?', (user,)).fetchall()
                out[table] = sorted(rows, key=repr)
        return out
    finally:
        conn.close()


def _postgres_user_rows(url: str, user: str) -> dict[str, list[tuple]]:
    import psycopg
    from psycopg import sql

    out = {}
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT t.table_name, bool_or(c.column_name = 'user_id') FROM information_schema.tables t"
            " JOIN information_schema.columns c ON c.table_schema = t.table_schema AND c.table_name = t.table_name"
            " WHERE t.table_schema = current_schema() AND t.table_type = 'BASE TABLE' GROUP BY t.table_name").fetchall()
        for table, has_user in tables:
            column = "user_id" if has_user else ("id" if table == "users" else None)
            if column:
                rows = conn.execute(sql.SQL("SELECT * FROM {} WHERE {} = %s").format(
                    sql.Identifier(table), sql.Identifier(column)), (user,)).fetchall()
                out[table] = sorted(rows, key=repr)
    return out


def user_rows(backend_name: str, db_url: str, tmp_path: Path, user: str) -> dict[str, list[tuple]]:
    """Every row that belongs to ``user`` in every table with a user column (sorted per table)."""
    if backend_name == "sqlite":
        return _sqlite_user_rows(tmp_path / "memory.db", user)
    return _postgres_user_rows(db_url, user)


def leaks(value: Any, marker: str) -> bool:
    """Whether ``marker`` shows anywhere in the value (its repr covers nested results)."""
    return marker in repr(value) or marker in str(value)


class ScriptedDraws:
    """Stands in for ``st.data()`` in an explicit ``@example``: answers the test's draws, in order.
    The example object is shared by every run of the test (one per backend): each run takes ``replay()``."""

    def __init__(self, *answers: Any) -> None:
        self.script = answers
        self.answers = list(answers)

    def replay(self) -> "ScriptedDraws":
        return ScriptedDraws(*self.script)

    def draw(self, strategy: Any, label: Any = None) -> Any:
        assert self.answers, f"the example has no answer left for a draw from {strategy!r}"
        return self.answers.pop(0)

    def __repr__(self) -> str:
        return f"ScriptedDraws({', '.join(map(repr, self.script))})"


# -- persons, promotion and the web apps, for the isolation property test -----------------------

B_PERSONS = [("Bella Brown", ["bee"]), ("Carl", ["grandpa"])]


def seed_promoted(store: Any, user: str, marker: str) -> None:
    """Three items with one vector: ``promote`` makes them a fact carrying ``marker``."""
    vector = [1.0] + [0.0] * 63  # the fake embeddings' size
    for n in range(3):
        store.add(user_id=user, content=f"{marker} repeated preference", embedding=vector, theme="preferences",
                  dedup=False)  # the repeats are the point
    assert store.promote(user_id=user).facts_added >= 1  # (B's other items may cluster too)


class HttpClients:
    """TestClients of the REST API and of the browser UI over one store."""

    TOKEN = "isolation-token-0123456789"

    def __init__(self, store: Any) -> None:
        from starlette.testclient import TestClient

        from navi_memory.ui.api import create_api_app
        from navi_memory.ui.app import create_app

        self.apps = {"api": create_api_app(store, token=self.TOKEN), "ui": create_app(store)}
        self.clients = {"api": TestClient(self.apps["api"], base_url="http://127.0.0.1",
                                          headers={"Authorization": f"Bearer {self.TOKEN}"}),
                        "ui": TestClient(self.apps["ui"], base_url="http://127.0.0.1")}

    def request(self, target: tuple[str, str], method: str, **kwargs: Any) -> Any:
        app, path = target
        return self.clients[app].request(method, path, **kwargs)

    def routes(self) -> list[tuple[str, str, str]]:
        from starlette.routing import Route

        return [(app, route.path, method) for app, asgi in self.apps.items() for route in asgi.routes
                if isinstance(route, Route) for method in sorted(route.methods - {"HEAD"})]


def _body(path: str, method: str, key: str, name: str) -> Any:
    if method == "GET" or method == "DELETE":
        return None
    if path.endswith("/facts"):
        return {"category": "profile", "key": key, "value": "A's value through the API"}
    if path.endswith("/household"):
        return {"mode": "multi", "members": [{"display_name": name, "notes": "A's person through the API"}]}
    return {"content": "A's note through the API"}


def http_requests(clients: HttpClients, user: str, item_id: int, key: str, name: str,
                  query: str, session_id: str = "") -> list[tuple[tuple[str, str], str, dict]]:
    """Every route of both apps as ``user`` (path), with another user's item id, fact key, person
    name, session id and words of their items in the ids, bodies and query parameters."""
    from navi_memory.ui.web import path_part

    out = []
    for app, template, method in clients.routes():
        path = template.replace("{user:path}", path_part(user)).replace("{item_id:int}", str(item_id))
        params = {"q": query, "key": key, "category": "profile", "person": name, "user": user, "id": session_id}
        out.append(((app, path), method, {"params": params, "json": _body(path, method, key, name)}))
    return out
