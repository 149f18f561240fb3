"""The devices each person of a household uses (schema 10, ``persons.devices``), on every backend:
a turn from a device is its person's (speaker inference, the adapters' ``device``), a device
belongs to one person, and devices survive export and import."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from navi_memory import ValidationError
from navi_memory.integrations._caller import StoreCaller
from navi_memory.integrations._context import MemoryContextBuilder

U = "u1"


def household(store):
    store.set_household_mode("multi", user_id=U)
    tom = store.add_person("Tom", user_id=U, devices=["tom-phone", "garage-speaker"])
    sarah = store.add_person("Sarah", user_id=U, aliases=["mom"], devices=["kitchen-speaker"])
    return tom, sarah


def test_a_turn_from_a_device_is_its_persons(store):
    tom, sarah = household(store)
    assert store.get_person("Tom", user_id=U).devices == ["tom-phone", "garage-speaker"]
    found = store.infer_speaker("what's for dinner?", user_id=U, device="kitchen-speaker")
    assert (found.speaker.display_name, found.confidence, found.reason) == ("Sarah", "high", "hint")
    assert store.infer_speaker("what's for dinner?", user_id=U, device="living-room-tv").speaker is None
    # the session's person wins over the device's
    assert store.infer_speaker("hi", user_id=U, hint="Tom", device="kitchen-speaker").speaker.display_name == "Tom"
    # a device belongs to one person; nothing written when refused
    with pytest.raises(ValidationError, match="device 'kitchen-speaker' is Sarah's"):
        store.update_person("Tom", user_id=U, devices=["tom-phone", "kitchen-speaker"])
    with pytest.raises(ValidationError, match="device 'tom-phone' is Tom's"):
        store.add_person("Leo", user_id=U, devices=["tom-phone"])
    with pytest.raises(ValidationError, match="devices"):
        store.add_person("Leo", user_id=U, devices=[""])
    assert [p.display_name for p in store.list_persons(user_id=U)] == ["Tom", "Sarah"]
    # moving a device: take it from one, give it to the other
    store.update_person("Sarah", user_id=U, devices=[])
    store.update_person("Tom", user_id=U, devices=["tom-phone", "kitchen-speaker"])
    assert store.infer_speaker(None, user_id=U, device="kitchen-speaker").speaker.display_name == "Tom"


def test_the_adapters_take_the_device_of_the_turn(store):
    household(store)
    store.add(user_id=U, content="Sarah likes lemon cake.", person="Sarah")
    caller = StoreCaller(store)
    builder = MemoryContextBuilder(caller, min_similarity=0, search_kwargs={"device": "kitchen-speaker"})
    seen = []
    original = caller.call

    def spy(request):
        seen.append(request.kwargs.get("person_hints"))
        return original(request)

    caller.call = spy
    builder.build("what cake do I like?", user_id=U)
    assert seen[-1] == ["Sarah"]
    from navi_memory.integrations.langchain import NaviMemoryRunnable

    out = NaviMemoryRunnable(store=store, user_id=U, search_kwargs={"device": "kitchen-speaker"},
                             min_similarity=0).invoke([SystemMessage("You help."), HumanMessage("my cake?")])
    assert any("lemon cake" in m.content for m in out)


def test_devices_survive_export_import_and_the_rest_api(store, db_url, fake_embeddings, tmp_path):
    from starlette.testclient import TestClient

    from navi_memory import MemoryStore
    from navi_memory.ui.api import create_api_app

    from .ui_helpers import LOCAL, TOKEN

    household(store)
    lines: list[dict] = []
    store.export(lines.append, user_id=U)
    with MemoryStore.open(f"sqlite:///{tmp_path / 'copy.db'}", embeddings=fake_embeddings) as copy:
        copy.import_records(lines)
        assert {p.display_name: p.devices for p in copy.list_persons(user_id=U)} == {
            "Tom": ["tom-phone", "garage-speaker"], "Sarah": ["kitchen-speaker"]}
    api = TestClient(create_api_app(store, token=TOKEN), base_url=LOCAL, headers={"Authorization": f"Bearer {TOKEN}"})
    made = api.put(f"/api/users/{U}/household", json={"members": [{"display_name": "Leo", "devices": ["leo-tablet"]}]})
    assert [p["devices"] for p in made.json()["persons"] if p["display_name"] == "Leo"] == [["leo-tablet"]]
    taken = api.put(f"/api/users/{U}/household", json={"members": [{"display_name": "Ann", "devices": ["tom-phone"]}]})
    assert taken.status_code == 422 and "Tom's" in taken.json()["error"]
