"""Importing and opening a store must not pull in heavy optional frameworks."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

HEAVY = ["langchain_core", "langchain", "langgraph", "langmem", "langchain_ollama", "llama_index", "torch",
         "sentence_transformers", "psycopg", "psycopg_pool", "pgvector", "starlette", "jinja2", "uvicorn", "playwright",
         "mcp", "mcp_types", "onnxruntime", "tokenizers", "usearch"]


def run(code: str, **env: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", **env})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_open_and_use_store_loads_no_heavy_framework(tmp_path):
    out = run(f"""
        import json, sys
        import navi_memory
        from navi_memory import MemoryStore
        store = MemoryStore.open("sqlite:///{tmp_path}/memory.db", embeddings="hashing")
        item = store.add(user_id="u", content="I love lattes")
        hits = store.search("lattes", user_id="u")
        store.upsert_fact(user_id="u", category="profile", key="name", value="U")
        store.close()
        heavy = {HEAVY!r}
        print(json.dumps({{"loaded": [m for m in heavy if m in sys.modules], "hits": [h.id for h in hits],
                          "item": item}}))
    """)
    assert out["loaded"] == []
    assert out["hits"] == [out["item"]]


def test_default_environment_open_loads_no_heavy_framework(tmp_path):
    # No embeddings argument: "auto" may pick a local model, but opening must not load it yet
    # (the first embedding call may; that is the provider's job).
    out = run(f"""
        import json, sys
        from navi_memory import MemoryStore
        store = MemoryStore.open("sqlite:///{tmp_path}/memory.db")
        store.list_items(user_id="u")
        print(json.dumps({{"loaded": [m for m in {HEAVY!r} if m in sys.modules], "model": store.embedding_model}}))
    """)
    assert out["loaded"] == []


def test_bare_import_is_light():
    out = run(f"""
        import json, sys
        import navi_memory
        print(json.dumps({{"loaded": [m for m in {HEAVY!r} + ["navi_memory.store", "sqlite3"]
                                      if m in sys.modules]}}))
    """)
    assert out["loaded"] == []


def test_the_command_line_loads_no_web_framework():
    out = run("""
        import json, sys
        from navi_memory.cli import build_parser
        build_parser().parse_args(["ui", "--port", "9999"])
        print(json.dumps({"loaded": [m for m in ("starlette", "jinja2", "uvicorn") if m in sys.modules]}))
    """)
    assert out["loaded"] == []


def test_the_command_line_lets_idle_blas_threads_sleep_and_the_bench_says_so():
    # OpenBLAS reads its thread timeout when numpy loads it: the CLI sets it first (a caller's value stays)
    code = """
        import json, os, sys
        import navi_memory.cli
        from navi_memory.bench import BLAS_THREAD_TIMEOUT
        import numpy
        print(json.dumps({"env": os.environ.get("OPENBLAS_THREAD_TIMEOUT"), "reported": BLAS_THREAD_TIMEOUT}))
    """
    assert run(code) == {"env": "4", "reported": "4"}
    assert run(code, OPENBLAS_THREAD_TIMEOUT="28") == {"env": "28", "reported": "28"}
