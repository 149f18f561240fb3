"""Checked by mypy (tests/test_backend_protocol.py): backend requests are checked against ``Backend``.

Each ignore below must be used (``--strict`` warns of unused ones): mypy objects to the call."""

from navi_memory.calls import BackendCall, db
from navi_memory.sansio import Op


def operation() -> Op[None]:
    yield db.get_item(user_id="u1", item_id=1)
    yield db.get_item(user_id="u1", item=1)  # type: ignore[call-arg]
    yield db.get_item(user_id="u1", item_id="1")  # type: ignore[arg-type]
    yield db.get_items(user_id="u1")  # type: ignore[attr-defined]


def recorded() -> BackendCall:
    return BackendCall("get_item", {"user_id": "u1", "item_id": 1})
