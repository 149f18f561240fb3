"""Benchmarks run by ``navi-memory bench ...`` (numpy + standard library only)."""

import os
import sys

# OpenBLAS keeps its threads spinning for about 0.1 s after each multi-threaded call (its default
# thread timeout). The latency bench times a bare two-thread scan between searches, and the spinning
# thread then held one of the two cores through the next search. Set before OpenBLAS loads (with
# numpy), idle threads sleep at once; the bench's report says which timeout applied. The CLI
# imports this first, so its other processes (serve, mcp) do not keep idle threads spinning either.
if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
BLAS_THREAD_TIMEOUT = os.environ.get("OPENBLAS_THREAD_TIMEOUT")  # None: OpenBLAS's default
