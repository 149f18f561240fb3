"""Storage algorithms written once for both SQL backends: generators of ``dialect.Q`` statements
that SQLite's and PostgreSQL's runners each execute in one transaction (see ``dialect``)."""
