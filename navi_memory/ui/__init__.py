"""Web access to memory (the ``ui`` extra: Starlette, Jinja2, uvicorn).

``create_app`` (``app.py``) is the read-only browser with JSON mirrors of each page; ``create_api_app``
(``api.py``) is the REST API with writes, always behind a token. Neither is imported by
``import navi_memory``; ``navi-memory ui`` and ``navi-memory serve`` start them.
"""
