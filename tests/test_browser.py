"""The memory browser in a real headless Chromium (Debian's package) driven by Playwright.

Screenshots land in tests/artifacts/browser/ (git-ignored) for a person to look at. Those of the
pages shown in docs/ui.md are checked (not blank, key text visible) and, with
UPDATE_DOCS_SCREENSHOTS=1, written to docs/img/ as small palette PNGs (opt-in: rendering differs a
little between machines, so a plain test run never changes the checked-in files). Chromium comes
from apt (.ci/run installs it); Playwright's own browser download is never used.
"""

from __future__ import annotations

import io
import os
import socket
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
import uvicorn
from PIL import Image
from playwright.sync_api import Page, sync_playwright

from navi_memory import MemoryStore
from navi_memory.ui.app import create_app

from .fakes import FakeClock, FakeEmbeddings
from .ui_helpers import IMG, SCRIPT, TOKEN, fill, fill_activity

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).parent / "artifacts" / "browser"
DOCS_IMG = Path(__file__).parent.parent / "docs" / "img"

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason=f"{CHROMIUM} is missing (Debian package chromium; .ci/run installs it)")


class ServerThread:
    """uvicorn serving an app on a free loopback port, in a daemon thread."""

    def __init__(self, app: object) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> "ServerThread":
        self.thread.start()
        deadline = time.monotonic() + 30  # readiness wait, not a timing assertion
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()


@pytest.fixture
def browser_store(tmp_path: Path) -> Iterator[MemoryStore]:
    clock = FakeClock()
    store = MemoryStore.open(f"sqlite:///{tmp_path}/browser.db", embeddings=FakeEmbeddings(), clock=clock)
    store.add_many([{"user_id": "alice", "content": f"Reading list entry {n}", "theme": "books"} for n in range(60)])
    fill(store, clock)  # newer than the reading list: on the first page
    yield store
    store.close()


@pytest.fixture
def page() -> Iterator[tuple[Page, list[str]]]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            dialogs: list[str] = []

            def on_dialog(dialog) -> None:  # an alert() here would mean stored text ran as script
                dialogs.append(dialog.message)
                dialog.dismiss()

            tab.on("dialog", on_dialog)
            yield tab, dialogs
        finally:
            browser.close()


def shot(tab: Page, name: str) -> None:
    tab.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def doc_shot(tab: Page, name: str) -> None:
    """A viewport screenshot for docs/ui.md: checked not blank (many shades, dark text on a light
    page), kept as a 64-colour PNG in the artifacts, and in docs/img/ when UPDATE_DOCS_SCREENSHOTS=1."""
    image = Image.open(io.BytesIO(tab.screenshot())).convert("RGB")
    darkest, lightest = image.convert("L").getextrema()
    assert darkest < 80 and lightest > 200, (name, darkest, lightest)
    assert len(image.getcolors(1 << 16) or range(1 << 16)) > 16, name  # a blank page has one or two colours
    small = image.quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    folders = [ARTIFACTS] + ([DOCS_IMG] if os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1" else [])
    for folder in folders:
        small.save(folder / f"ui-{name}.png", optimize=True)


def item_rows(tab: Page) -> int:
    return tab.locator("table.items > tbody > tr").count()


def hostile_id(tab: Page) -> str:
    row = tab.locator("table.items > tbody > tr", has_text=f"{SCRIPT} tea notes")
    return row.locator("td").first.inner_text().strip()


def test_browse_filter_toggle_archived_and_search(browser_store: MemoryStore, page) -> None:
    tab, dialogs = page
    with ServerThread(create_app(browser_store)) as server:
        tab.goto(server.url + "/")
        assert tab.locator("table.grid").inner_text().count("alice") == 1
        shot(tab, "1-users")

        tab.click("text=alice")
        tab.wait_for_url("**/users/alice/items")
        assert tab.locator(".pager").first.inner_text().startswith("items 1–50 of 66")
        assert "Lived in Lisbon" not in tab.content()  # archived: hidden by default
        assert tab.get_by_text(f"{SCRIPT} tea notes").count() == 1  # shown as text, not run
        assert tab.locator("img").count() == 0
        shot(tab, "2-items")

        tab.click(f"table.items a:text-is('{hostile_id(tab)}')")
        tab.wait_for_url("**/users/alice/items/*")
        assert tab.locator("pre.text").inner_text() == f"{SCRIPT} tea notes" and tab.locator("h2").inner_text() == IMG
        assert tab.locator("img").count() == 0
        shot(tab, "2b-item")
        tab.go_back()

        tab.click("a[rel=next]")
        tab.wait_for_url("**offset=50")
        assert item_rows(tab) == 16
        shot(tab, "3-items-page-2")

        tab.goto(server.url + "/users/alice/items")
        tab.select_option("select[name=theme]", "drinks")
        tab.select_option("select[name=type]", "preference")
        tab.click("form.filters button[type=submit]")
        tab.wait_for_url("**type=preference**")
        assert item_rows(tab) == 1 and "Used to like espresso" in tab.locator("table.items").inner_text()
        shot(tab, "4-filtered")

        tab.goto(server.url + "/users/alice/items?theme=places")
        assert item_rows(tab) == 0
        tab.check("input[name=archived]")
        tab.click("form.filters button[type=submit]")
        tab.wait_for_url("**archived=1**")
        assert item_rows(tab) == 1 and "Lived in Lisbon" in tab.locator("table.items").inner_text()
        assert tab.locator("tr.archived").count() == 1
        shot(tab, "5-archived")

        tab.click("header nav >> text=Search")
        tab.fill("input[name=q]", "green tea")
        tab.click("form.filters button[type=submit]")
        tab.wait_for_url("**q=green+tea**")
        first = tab.locator("table.results > tbody > tr").first
        assert "Alice drinks green tea every morning" in first.inner_text()
        assert first.locator(".signal.on").count() >= 1 and "fused" in first.locator("td.breakdown").inner_text()
        shot(tab, "6-search")

        tab.click("header nav >> text=Facts")
        facts = tab.locator("table.facts").inner_text()
        assert "Porto" in facts and "Lisbon" in facts and IMG in facts
        shot(tab, "7-facts")

        tab.click("header nav >> text=Summary")
        assert SCRIPT in tab.locator("article.current").inner_text()
        shot(tab, "8-summary")
        assert tab.locator("img").count() == 0 and tab.locator("main script").count() == 0
    assert dialogs == []


def test_token_from_the_address_opens_the_pages(browser_store: MemoryStore, page) -> None:
    tab, dialogs = page
    with ServerThread(create_app(browser_store, token=TOKEN, host="0.0.0.0")) as server:
        refused = tab.goto(server.url + "/users/alice/items")
        assert refused is not None and refused.status == 401
        tab.goto(f"{server.url}/users/alice/items?token={TOKEN}")
        assert TOKEN not in tab.url and tab.url.endswith("/users/alice/items")
        assert "Alice drinks green tea" in tab.content()
        tab.goto(server.url + "/users/alice/facts")  # the cookie carries the token from now on
        assert "Porto" in tab.locator("table.facts").inner_text()
        shot(tab, "9-token")
    assert dialogs == []


def test_household_sessions_cost_unknown_user_and_relevance_cutoff(browser_store: MemoryStore, page) -> None:
    tab, dialogs = page
    fill_activity(browser_store)
    tab.set_viewport_size({"width": 1200, "height": 560})
    with ServerThread(create_app(browser_store)) as server:
        tab.goto(server.url + "/users/alice/items")
        tab.click("header nav >> text=Household")
        tab.wait_for_url("**/users/alice/household")
        persons = tab.locator("table.persons > tbody > tr")
        assert persons.count() == 2 and tab.locator(".mode").inner_text() == "multi"
        assert persons.first.locator("td.name").inner_text() == f"Anna {SCRIPT}"  # text, not markup
        assert tab.get_by_text(IMG, exact=True).is_visible() and tab.get_by_text("she/her").is_visible()
        doc_shot(tab, "household")

        tab.click("header nav >> text=Sessions")
        tab.wait_for_url("**/users/alice/sessions")
        assert tab.locator("table.sessions > tbody > tr").count() == 2
        tab.click("table.sessions a:text-is('morning chat')")
        tab.wait_for_url("**/session?id=morning%20chat")
        assert tab.locator("li.message.user .text").inner_text() == f"I like green tea {SCRIPT}"
        assert tab.locator("li.message.assistant .text").inner_text() == f"Noted! {IMG}"
        doc_shot(tab, "session")

        tab.goto(server.url + "/users/frank/sessions")
        error = tab.locator("tr.session-error div.error")
        assert error.is_visible() and f"provider down {SCRIPT}" in error.inner_text()
        assert tab.locator("tr.session-extracted .state.extracted").is_visible()
        doc_shot(tab, "sessions")

        tab.click("header nav >> text=LLM cost")
        tab.wait_for_url("**/users/frank/usage")
        assert tab.locator("td.calls").inner_text() == "3" and tab.get_by_text("2,400").first.is_visible()
        assert tab.locator("table.purposes").inner_text().count("extract") == 1
        doc_shot(tab, "usage")

        tab.goto(server.url + "/users/alice/search?q=green+tea")
        cutoff = tab.locator("p.relevance")
        assert cutoff.is_visible() and "weaker result(s) below the relevance floor 0.25 hidden" in cutoff.inner_text()
        shown = tab.locator("table.results > tbody > tr").count()
        doc_shot(tab, "search-cutoff")
        cutoff.locator("text=Show all").click()
        tab.wait_for_url("**all=1**")
        assert tab.locator("table.results > tbody > tr").count() > shown
        assert tab.locator("tr.weak").first.is_visible() and tab.locator("input[name=all]").is_checked()

        missing = tab.goto(server.url + "/users/nobody/items")
        assert missing is not None and missing.status == 404
        assert tab.locator("p.error").inner_text() == "no memory stored for user nobody"
        assert tab.locator("header nav").count() == 0
        doc_shot(tab, "unknown-user")
        assert tab.locator("img").count() == 0 and tab.locator("main script").count() == 0
    assert dialogs == []
