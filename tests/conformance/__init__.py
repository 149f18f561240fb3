"""The harness that runs LangGraph's own store tests against NaviStore (harness.py)."""
