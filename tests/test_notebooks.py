"""The notebooks in notebooks/ run top to bottom (offline stand-in models unless OLLAMA_HOST is set)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

OLLAMA_HOST = os.environ.get("OLLAMA_HOST")  # read before the hermetic fixture clears it
NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == ["01_quickstart_sqlite.ipynb", "02_langchain_agent.ipynb",
                                          "03_llamaindex_agent.ipynb", "04_postgresql.ipynb",
                                          "05_one_agent_many_users.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    if OLLAMA_HOST:  # the notebooks then use Ollama instead of their offline stand-ins
        monkeypatch.setenv("OLLAMA_HOST", OLLAMA_HOST)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebooks' mkdtemp() folders (a database, a server) go here
    if "postgres" in path.stem:
        request.applymarker(pytest.mark.postgres)
    notebook = nbformat.read(path, as_version=4)
    # the kernel talks over socket files in tmp_path, not TCP ports: ports are picked free, then bound by
    # the kernel, and another test process can take one in between ("Address already in use": the kernel
    # never answers)
    from jupyter_client.manager import KernelManager

    kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(tmp_path / "kernel"))
    try:
        nbclient.NotebookClient(notebook, km=kernel, timeout=600,
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:  # a kernel manager given to the client is the caller's to stop
        if kernel.has_kernel:
            kernel.shutdown_kernel(now=True)
    errors = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == []
