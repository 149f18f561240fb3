"""What the reranking stage adds to a search, measured A/B in one process on LoCoMo dev.

One store holds the dev turns; every question is searched once per arm, the arms taking turns
question by question (their order rotating), so a busy machine slows them alike:

* ``none``: the search without the stage;
* ``stage``: ``--reranker SPEC`` as this checkout resolves it (its caches, and for ``onnx:`` the
  best 8 first, the rest of depth 20 when none scores 2);
* ``stage 30``: the same two steps to depth 30 (the stage before the depth of 20; a model of its own);
* ``all``: the same model reading all its depth at once (``adaptive=False``; a model of its own,
  so no arm reads scores another arm kept);
* ``before`` (with ``--before DIR``): the same model through the ``OnnxCrossEncoder`` of another
  checkout (e.g. ``git archive main | tar -x -C DIR``) at a fixed depth: what the stage cost there.

Reports per arm wall time p50 / p95 (query embedding included), the p50 and mean of what it adds
to the same question's search without the stage, CPU time of the process per search (all threads; less
sensitive to other load than wall time), the model's pairs per search, R@5/R@10 (as the bench).

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/locomo_rerank_cost.py \\
        --data ../shared/data/locomo/locomo_dev.json --reranker onnx:<folder> [--before DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from navi_memory import MemoryStore
from navi_memory.bench import embed_cache, write_report
from navi_memory.bench.locomo_data import questions, score, store_turns
from navi_memory.config import Settings
from navi_memory.embeddings import resolve_embedder
from navi_memory.reranking import DEFAULT_DEPTH, ONNX, Reranker, resolve_reranker

LIMIT = 20


def before_arm(checkout: Path, spec: str) -> Reranker:
    """The ONNX cross-encoder of another checkout behind this checkout's stage, at the fixed depth."""
    source = (checkout / "navi_memory" / "onnx_reranker.py").read_text(encoding="utf-8")
    module_spec = importlib.util.spec_from_loader("before_onnx_reranker", loader=None)
    assert module_spec is not None and spec.startswith(ONNX), "--before compares an onnx:<folder> reranker"
    module = importlib.util.module_from_spec(module_spec)
    exec(compile(source.replace("from .errors", "from navi_memory.errors"), "before_onnx_reranker", "exec"),
         module.__dict__)
    model = module.OnnxCrossEncoder(spec[len(ONNX):])
    return Reranker(lambda query, texts: model.predict([(query, t) for t in texts]), "before")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--reranker", required=True, metavar="SPEC")
    parser.add_argument("--before", type=Path, default=None, metavar="DIR")
    parser.add_argument("--questions", type=int, default=0, help="ask N questions spread evenly over the conversations (0: all)")
    parser.add_argument("--cache", type=Path, default=embed_cache.DEFAULT_DIR)
    parser.add_argument("--json", dest="json_out", type=Path, default=None)
    args = parser.parse_args()
    stage = resolve_reranker(args.reranker)
    assert stage is not None, "give a reranker"
    arms: dict[str, Reranker | None] = {"none": None, "stage": stage}
    if stage.first is not None and stage.depth != DEFAULT_DEPTH:
        arms["stage 30"] = resolve_reranker(args.reranker, depth=DEFAULT_DEPTH)
    if stage.first is not None:
        arms["all"] = resolve_reranker(args.reranker, adaptive=False)
    if args.before:
        arms["before"] = before_arm(args.before, args.reranker)
    pairs = {name: 0 for name in arms}

    def counted(name: str, reranker: Reranker | None) -> Reranker | None:
        if reranker is None:
            return None

        def scorer(query: str, texts: list[str]) -> list[float]:
            pairs[name] += len(texts)
            return reranker.score(query, texts)
        return Reranker(scorer, name, reranker.depth, reranker.weight, reranker.first, reranker.enough)

    wrapped = {name: counted(name, r) for name, r in arms.items()}
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    wall: dict[str, list[float]] = {name: [] for name in arms}
    cpu: dict[str, list[float]] = {name: [] for name in arms}
    found: dict[str, list[dict[str, float]]] = {name: [] for name in arms}
    with tempfile.TemporaryDirectory(prefix="navi-rerank-cost-") as tmp:
        url = f"sqlite:///{tmp}/locomo.db"
        settings = Settings(url=url, embeddings="local")
        embedder = embed_cache.cached(resolve_embedder("local", settings), args.cache)
        with MemoryStore.open(url, embedder, settings=settings, reranker=False) as store:
            store_turns(store, samples)
            asked = [(s["sample_id"], q) for s in samples for q in questions(s)]
            if args.questions:
                asked = [asked[i * len(asked) // args.questions] for i in range(min(args.questions, len(asked)))]
            names = list(arms)
            for index, (user, q) in enumerate(asked):
                for name in names[index % len(names):] + names[:index % len(names)]:
                    store.set_reranker(wrapped[name])
                    start, start_cpu = time.perf_counter(), time.process_time()
                    ranked = store.search(q["question"], user_id=user, limit=LIMIT, min_score=0)  # as the bench
                    cpu[name].append((time.process_time() - start_cpu) * 1000)
                    wall[name].append((time.perf_counter() - start) * 1000)
                    found[name].append(score([r.metadata["dia_id"] for r in ranked], q["evidence"]))
    report: dict[str, Any] = {"reranker": args.reranker, "questions": len(asked), "load_average": os.getloadavg(),
                              "arms": {}}
    for name in arms:
        report["arms"][name] = {
            "wall_ms": {"p50": round(float(np.percentile(wall[name], 50)), 1),
                        "p95": round(float(np.percentile(wall[name], 95)), 1)},
            "cpu_ms_mean": round(float(np.mean(cpu[name])), 1),
            "added_cpu_ms_p50": round(float(np.percentile(np.subtract(cpu[name], cpu["none"]), 50)), 1),
            "added_wall_ms_p50": round(float(np.percentile(np.subtract(wall[name], wall["none"]), 50)), 1),
            "added_wall_ms_mean": round(float(np.mean(np.subtract(wall[name], wall["none"]))), 1),
            "pairs_per_search": round(pairs[name] / len(asked), 1),
            "recall": {str(k): round(float(np.mean([f[f"recall@{k}"] for f in found[name]])), 4) for k in (5, 10)}}
        arm = report["arms"][name]
        print(f"{name:<8} wall p50 {arm['wall_ms']['p50']:>7} p95 {arm['wall_ms']['p95']:>7} ms"
              f"  added p50 {arm['added_wall_ms_p50']:>7} mean {arm['added_wall_ms_mean']:>7} ms"
              f"  cpu mean {arm['cpu_ms_mean']:>7}"
              f" added p50 {arm['added_cpu_ms_p50']:>7} ms"
              f"  pairs {arm['pairs_per_search']:>5}  R@5 {arm['recall']['5']}  R@10 {arm['recall']['10']}")
    print(f"load average (1, 5, 15 min) at the end: {report['load_average']}")
    if args.json_out:
        write_report(args.json_out, report)


if __name__ == "__main__":
    main()
