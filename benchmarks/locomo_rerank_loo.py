"""The reranking stage's depth and weight on LoCoMo dev, chosen leave one conversation out.

Every question is searched once without a reranker (the top 50), the model scores all 50, and
each (depth, weight) setting is re-scored from those numbers with the product's own
``retrieval.stage.blend``; so the grid costs one model pass. A setting's rows equal what
``navi-memory bench locomo --reranker SPEC --rerank-depth D --rerank-weight W --rerank-all``
measures. Settings "first F, enough E" read the best F of depth 30 and the rest only when none
of those scored E (``retrieval.stage.reads_on``; what an ``onnx:`` reranker does without
``--rerank-all``, F 8 and E 2); a second leave-one-out chooses among them alone.

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/locomo_rerank_loo.py \\
        --data ../shared/data/locomo/locomo_dev.json --reranker onnx:<folder> [--max-length 48] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from navi_memory import MemoryStore
from navi_memory.bench import embed_cache, write_report
from navi_memory.bench.locomo_data import questions, score, store_turns
from navi_memory.bench.locomo_loo import _line, leave_one_out, pooled
from navi_memory.config import Settings
from navi_memory.embeddings import resolve_embedder
from navi_memory.onnx_reranker import OnnxCrossEncoder
from navi_memory.progress import Progress
from navi_memory.reranking import ONNX, resolve_reranker
from navi_memory.retrieval.search import model_text
from navi_memory.retrieval.stage import blend, reads_on, reorder

TOP = 50
DEPTHS = (10, 20, 30, 50)
WEIGHTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)
FIRSTS = (6, 8, 10)
ENOUGHS = (0.0, 1.0, 2.0, 3.0, 4.0)
TWO_STEPS = "first "


def collect(data: Path, spec: str, cache: Path, max_length: int | None = None) -> list[dict[str, Any]]:
    """Per question: its conversation, category, evidence, the top 50 (dia_id, first-stage score) and the model's
    scores (``max_length``: an ``onnx:`` model's pairs cut to that many tokens, as a cheaper read would)."""
    samples = json.loads(data.read_text(encoding="utf-8"))
    if max_length is not None:
        assert spec.startswith(ONNX), "--max-length cuts the pairs of an onnx:<folder> model"
        model = resolve_reranker(OnnxCrossEncoder(spec[len(ONNX):], max_length=max_length))
    else:
        model = resolve_reranker(spec)
    assert model is not None, "give a reranker"
    with tempfile.TemporaryDirectory(prefix="navi-rerank-loo-") as tmp:
        url = f"sqlite:///{tmp}/locomo.db"
        settings = Settings(url=url, embeddings="local")
        embedder = embed_cache.cached(resolve_embedder("local", settings), cache)
        with MemoryStore.open(url, embedder, settings=settings, reranker=False) as store:
            store_turns(store, samples)
            asked = [(s["sample_id"], q) for s in samples for q in questions(s)]
            out, progress = [], Progress("questions", len(asked))
            for index, (user, q) in enumerate(asked):
                found = store.search(q["question"], user_id=user, limit=TOP, min_score=0)
                out.append({"user": user, "category": q["category"], "evidence": q["evidence"],
                            "dia": [r.metadata["dia_id"] for r in found],
                            "first": [r.scores.get("rank", r.score) for r in found],  # what the stage blends
                            "model": model.score(q["question"], [model_text(r) for r in found])})
                progress(index + 1)
            progress.close()
    return out


def reads(row: dict[str, Any], depth: int, first: int | None, enough: float | None) -> int:
    """How many candidates the model reads: all ``depth``, or ``first`` when one of those scores ``enough``."""
    if first is None or enough is None or first >= depth or reads_on(row["model"][:first], enough):
        return min(depth, len(row["dia"]))
    return min(first, len(row["dia"]))


def ranked(row: dict[str, Any], depth: int, weight: float | None, first: int | None = None,
           enough: float | None = None) -> list[str]:
    if weight is None:
        return list(row["dia"])
    n = reads(row, depth, first, enough)
    mixed = dict(enumerate(blend(row["first"][:n], row["model"][:n], weight)))
    return [row["dia"][i] for i in reorder(range(len(row["dia"])), mixed)]


def grid_rows(collected: list[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    users = sorted({r["user"] for r in collected})
    settings: list[tuple[str, int, float | None, int | None, float | None]] = [("no reranker", 0, None, None, None)]
    settings += [(f"depth {d}, weight {w:g}", d, w, None, None) for d in DEPTHS for w in WEIGHTS]
    settings += [(f"{TWO_STEPS}{f}, enough {e:g}, depth 30, weight {w:g}", 30, w, f, e)
                 for f in FIRSTS for e in ENOUGHS for w in WEIGHTS]
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name, depth, weight, first, enough in settings:
        rows[name] = {u: [] for u in users}
        for r in collected:
            rows[name][r["user"]].append({"category": r["category"], "reads": reads(r, depth, first, enough),
                                          "score": score(ranked(r, depth, weight, first, enough)[:20],
                                                         r["evidence"])})
    return rows


def _reads(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The model's reads per question: median, mean and the share of questions it read the most."""
    counts = sorted(r["reads"] for r in rows)
    return {"p50": float(counts[len(counts) // 2]), "mean": round(sum(counts) / len(counts), 1),
            "all": round(sum(c == counts[-1] for c in counts) / len(counts), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--reranker", required=True, metavar="SPEC", help="onnx:<folder> or cross-encoder:<model>")
    parser.add_argument("--cache", type=Path, default=embed_cache.DEFAULT_DIR)
    parser.add_argument("--json", dest="json_out", type=Path, default=None)
    parser.add_argument("--scores", type=Path, default=None,
                        help="keep the model's scores here; a later run with the same file reads them instead")
    parser.add_argument("--max-length", type=int, default=None,
                        help="an onnx: model's pairs cut to this many tokens (default: the model's 512)")
    args = parser.parse_args()
    if args.scores and args.scores.is_file():
        collected = json.loads(args.scores.read_text(encoding="utf-8"))
    else:
        collected = collect(args.data, args.reranker, args.cache, args.max_length)
        if args.scores:
            args.scores.write_text(json.dumps(collected), encoding="utf-8")
    rows = grid_rows(collected)
    users = sorted(next(iter(rows.values())))
    report: dict[str, Any] = {"reranker": args.reranker, "top": TOP, "max_length": args.max_length,
                              "settings": {name: {**pooled([r for u in users for r in by_user[u]]),
                                                  "reads": _reads([r for u in users for r in by_user[u]])}
                                           for name, by_user in rows.items()}}
    one_step = {k: v for k, v in rows.items() if k != "no reranker" and not k.startswith(TWO_STEPS)}
    report["leave_one_out"] = leave_one_out(one_step, users)
    report["leave_one_out_two_steps"] = leave_one_out({k: v for k, v in rows.items() if k.startswith(TWO_STEPS)},
                                                      users)
    best = sorted(report["settings"].items(), key=lambda kv: -(kv[1]["recall"]["5"] + kv[1]["recall"]["10"]))
    print(f"  {'all dev':<56} {'R@5':>6} {'R@10':>6} {'NDCG@10':>8}   R@5/R@10 for categories 1 2 3 4"
          "   reads p50 / mean")
    for name in ["no reranker", "depth 30, weight 0.5", "depth 30, weight 1", "depth 10, weight 0.5",
                 f"{TWO_STEPS}8, enough 2, depth 30, weight 0.5"] + [n for n, _ in best[:6]]:
        reads_of = report["settings"][name]["reads"]
        print(f"{_line(name, report['settings'][name])}   {reads_of['p50']:g} / {reads_of['mean']:g}")
    for key in ("leave_one_out", "leave_one_out_two_steps"):
        print(_line(f"{key.replace('_', ' ')} (held-out pooled)", report[key]))
        for fold in report[key]["folds"]:
            print(_line(f"  {fold['held_out']}: {fold['chosen']}", fold))
    if args.json_out:
        write_report(args.json_out, report)


if __name__ == "__main__":
    main()
