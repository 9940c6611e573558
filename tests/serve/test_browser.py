"""End to end in a real browser: headless Chromium plays a whole round against ``best`` by
clicking the page's moves, without a reload, then opens a replay and steps through it.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them; the README
says how); without them the test is skipped, saying so. Nothing is downloaded: the browser
runs with its network features off. With ``LOSTCITIES_SERVE_SCREENSHOT=PATH`` set, it saves
the page mid-round there (the README's ``docs/figures/serve.png``).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.game import Rules
from lostcities_cfr.serve.app import create_app
from lostcities_cfr.serve.replays import ReplayLibrary

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Debian's chromium and chromium-driver: apt-get install chromium "
    "chromium-driver (.ci/run installs them)",
)
webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,950",
)
SCREENSHOT_AT = 24  # clicks into the round: the board is full and the agent has reasoned


@pytest.fixture(scope="module")
def server_url(record_file) -> Iterator[str]:
    """The page against ``best`` with the test record file, served on a free local port."""
    app = create_app(agent_from_spec("best", seed=0), Rules.classic(), ReplayLibrary(record_file))
    with socket.create_server(("127.0.0.1", 0)) as trial:
        port = trial.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def browser(tmp_path) -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=webdriver.ChromeService(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def wait(driver, seconds: float = 20) -> WebDriverWait:
    """Polls every 20 ms (Selenium's default, 500 ms, would dominate a round of clicks)."""
    return WebDriverWait(driver, seconds, poll_frequency=0.02)


def settled(driver) -> dict:
    """The page's state once no request is on its way."""
    wait(driver).until(lambda d: d.execute_script("return document.body.dataset.busy === '0'"))
    return driver.execute_script("return {...document.body.dataset}")


def test_a_whole_round_against_best_is_played_by_clicking_without_a_reload(browser, server_url):
    rng = random.Random(0)
    browser.get(server_url)
    wait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "button.move"))
    browser.execute_script("window.notReloaded = true")
    assert "against best" in browser.find_element(By.ID, "info").text
    clicks = 0
    while (page := settled(browser))["roundOver"] == "0":
        turn = page["turn"]
        actions = browser.execute_script(
            "return [...document.querySelectorAll('button.move')].map(b => b.dataset.action)"
        )
        # drawing from the deck whenever it may keeps the round to its usual length
        deck = str(Rules.classic().draw_deck_action)
        action = deck if deck in actions else rng.choice(actions)
        browser.find_element(By.CSS_SELECTOR, f"button.move[data-action='{action}']").click()
        wait(browser).until(
            lambda d, turn=turn: d.execute_script("return document.body.dataset.turn") != turn
        )
        clicks += 1
        if clicks == SCREENSHOT_AT and os.environ.get("LOSTCITIES_SERVE_SCREENSHOT"):
            settled(browser)
            browser.save_screenshot(os.environ["LOSTCITIES_SERVE_SCREENSHOT"])
        assert clicks < 500, "the round did not end"
        assert browser.find_element(By.ID, "error").is_displayed() is False
    assert clicks > 20  # a whole round: a card and a draw decision per turn
    assert browser.execute_script("return window.notReloaded") is True
    summary = browser.find_element(By.ID, "summary").text
    assert "You:" in summary and "best:" in summary and "Next round" in summary
    assert "round 1" in browser.find_element(By.ID, "scores").text
    reasoning = browser.find_element(By.ID, "reasoning").text
    assert "probability" in reasoning or "has not moved" in reasoning
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []


def test_a_replay_is_sorted_by_score_difference_and_stepped_both_ways(browser, server_url):
    browser.get(server_url)
    wait(browser, 30).until(lambda d: d.find_element(By.ID, "tab-replays").is_displayed())
    browser.find_element(By.ID, "tab-replays").click()
    wait(browser, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#games tbody tr"))
    browser.find_element(By.CSS_SELECTOR, "th[data-key=diff]").click()
    rows = browser.find_elements(By.CSS_SELECTOR, "#games tbody tr")
    diffs = [int(row.find_elements(By.TAG_NAME, "td")[-1].text) for row in rows]
    assert len(diffs) == 6 and diffs == sorted(diffs)  # the worst loss first
    rows[0].click()
    label = browser.find_element(By.ID, "step-label")
    wait(browser, 10).until(lambda d: "decision 1 of" in label.text)
    for expected in (1, 2, 3):
        browser.find_element(By.ID, "step-forward").click()
        wait(browser, 10).until(
            lambda d, step=expected: (
                d.execute_script("return document.body.dataset.replayStep") == str(step)
            )
        )
    browser.find_element(By.ID, "step-back").click()
    wait(browser, 10).until(lambda d: "decision 3 of" in label.text)
    assert "◀" in browser.find_element(By.ID, "replay-decision").text  # the recorded action
