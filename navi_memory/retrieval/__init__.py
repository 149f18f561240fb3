"""Pure retrieval logic: query parsing, fusion and re-ranking. No I/O in this package."""
