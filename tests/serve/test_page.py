"""The chat page at `GET /`, driven in a real headless Chromium: tokens shown as they stream,
tool calls with their results, an interrupt approved from the page, a thread's history after a
reload, message text never run as HTML, and the bearer token of a server with auth.

Skipped when Playwright or Chromium is missing (CI installs both: see .ci/chromium.sh)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api")
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tenxgraph.serve.auth import bearer_tokens
from tests.serve._page_server import ChatModel, serving

CHROMIUM = os.environ.get("TENXGRAPH_CHROMIUM", "/usr/bin/chromium")
if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 15_000
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def model() -> ChatModel:
    return ChatModel()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model: ChatModel) -> Iterator[str]:
    with serving(str(tmp_path_factory.mktemp("page") / "server.db"), model) as url:
        yield url


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    context = browser.new_context(base_url=server)
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    tab.goto("/")
    expect(tab.get_by_test_id("status")).to_have_text("ready")
    yield tab
    context.close()


def _send(page: Page, text: str) -> None:
    page.get_by_test_id("new-thread").click()
    page.get_by_test_id("input").fill(text)
    page.get_by_test_id("input").press("Enter")


def _last_answer(page: Page) -> str:
    return page.get_by_test_id("msg-ai").last.get_by_test_id("text").inner_text()


def test_the_answer_is_shown_while_it_streams(page: Page, model: ChatModel) -> None:
    _send(page, "slow please")
    answer = page.get_by_test_id("msg-ai").last
    expect(answer).to_contain_text("first part")  # shown while the model still waits
    assert "second part" not in answer.inner_text()
    model.gate.set()
    expect(answer).to_contain_text("first part second part.")
    expect(page.get_by_test_id("status")).to_have_text("")  # the run ended
    expect(page.get_by_test_id("msg-human").get_by_test_id("text")).to_have_text(["slow please"])


def test_a_tool_call_is_shown_with_its_result_and_the_reasoning(page: Page) -> None:
    _send(page, "weather in Lisbon?")
    expect(page.get_by_test_id("tool-call")).to_contain_text('weather({"city":"Lisbon"})')
    expect(page.get_by_test_id("tool-result")).to_contain_text("sunny in Lisbon")
    expect(page.get_by_test_id("reasoning")).to_contain_text("I will look it up")
    expect(page.get_by_test_id("msg-ai").last).to_contain_text("The tool said: sunny in Lisbon")


def test_an_interrupt_is_approved_from_the_page(page: Page) -> None:
    _send(page, "transfer 40 EUR to Bob")
    expect(page.get_by_test_id("interrupt")).to_be_visible()
    expect(page.get_by_test_id("interrupt-value")).to_contain_text("Send 40 EUR to Bob?")
    assert not page.get_by_test_id("tool-result").count()  # the tool has not run yet
    page.get_by_test_id("approve").click()
    expect(page.get_by_test_id("tool-result")).to_contain_text("sent 40 EUR to Bob")
    expect(page.get_by_test_id("msg-ai").last).to_contain_text("The tool said: sent 40 EUR")
    expect(page.get_by_test_id("interrupt")).to_be_hidden()


def test_an_interrupted_thread_opened_later_is_rejected_from_the_page(page: Page) -> None:
    _send(page, "transfer again")
    expect(page.get_by_test_id("interrupt")).to_be_visible()
    page.reload()
    expect(page.get_by_test_id("status")).to_have_text("ready")
    expect(page.get_by_test_id("interrupt")).to_be_hidden()
    threads = page.get_by_test_id("threads")
    choice = threads.locator("option", has_text="transfer again (interrupted)")
    threads.select_option(choice.get_attribute("value"))
    expect(page.get_by_test_id("interrupt-value")).to_contain_text("Send 40 EUR to Bob?")
    page.get_by_test_id("reject").click()
    expect(page.get_by_test_id("tool-result")).to_contain_text("result of transfer")
    expect(page.get_by_test_id("msg-ai").last).to_contain_text("declined: False")
    expect(page.get_by_test_id("interrupt")).to_be_hidden()


def test_a_thread_history_is_shown_after_a_reload(page: Page) -> None:
    _send(page, "remember the llamas")
    expect(page.get_by_test_id("msg-ai").last).to_contain_text("You said: remember the llamas")
    page.reload()
    expect(page.get_by_test_id("status")).to_have_text("ready")
    expect(page.get_by_test_id("msg-human")).to_have_count(0)  # a reload opens no thread
    threads = page.get_by_test_id("threads")
    value = threads.locator("option", has_text="remember the llamas").get_attribute("value")
    assert value
    threads.select_option(value)
    expect(page.get_by_test_id("msg-human")).to_contain_text(["remember the llamas"])
    expect(page.get_by_test_id("msg-ai")).to_contain_text(["You said: remember the llamas"])


def test_message_text_is_shown_as_text_never_run_as_html(page: Page) -> None:
    attack = '<img src=x onerror="window.pwned=1"><b>bold</b>'
    _send(page, attack)
    expect(page.get_by_test_id("msg-ai").last).to_contain_text("You said: " + attack)
    expect(page.get_by_test_id("msg-human").last).to_contain_text(attack)
    assert page.get_by_test_id("messages").locator("img, b").count() == 0
    assert page.evaluate("window.pwned") is None


def test_a_server_with_auth_asks_for_the_token(
    browser: Browser, tmp_path_factory: pytest.TempPathFactory
) -> None:
    db = str(tmp_path_factory.mktemp("auth") / "server.db")
    with serving(db, ChatModel(), auth=bearer_tokens({"tok": "alice"})) as url:
        context = browser.new_context(base_url=url)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto("/")
        expect(page.get_by_test_id("error")).to_contain_text("401")
        expect(page.get_by_test_id("error")).to_contain_text("bearer token")
        page.get_by_test_id("token").fill("tok")
        page.get_by_test_id("save-token").click()
        expect(page.get_by_test_id("status")).to_have_text("ready")
        expect(page.get_by_test_id("error")).to_have_text("")
        _send(page, "hello with a token")
        expect(page.get_by_test_id("msg-ai").last).to_contain_text("You said: hello with a token")
        page.reload()  # the token is kept in localStorage
        expect(page.get_by_test_id("status")).to_have_text("ready")
        expect(page.get_by_test_id("token")).to_have_value("tok")
        context.close()
