"""The serve page's response times, against the targets of docs/serve.md.

Starts ``python -m lostcities_cfr serve --agent AGENT --replay FILE --port 0`` (the command a
person runs) and talks to it over HTTP from this process (``http.client``, one kept-alive
connection, as a browser tab would), timing each request from sending it to the last byte
of its answer:

- ``move``: the person's move, answered once the agent has played its whole turn and
  explained each decision; ``--rounds`` rounds in which the person draws from the deck
  whenever it may and otherwise plays a random legal card move;
- ``replay list``: the file's games (``GET /api/replays``);
- ``replay step (cold)``: a decision of a game not opened before (the server replays it);
- ``replay step``: the next decisions of an open game, forwards then backwards;
- ``replay file read``: reading and checking every line of the file, in this process
  (what ``serve --replay`` does at start, before its agents load);
- ``server start``: from launch to the first answer (importing Lightning for ``best``, and
  loading the agents the file names).

With ``--recording`` it also times ``evaluate`` of ``AGENT`` against ``heuristic`` (1000
games, one thread) with and without a ``GameRecorder``, alternating, three times each in
this process: ``evaluate (plain)`` and ``evaluate (recorded)``.

With ``--browser`` it also drives headless Chromium (Debian's ``chromium`` and
``chromium-driver``, as the browser test does) through the page, and reads the page's own
clock (``performance.now()`` from the click to the page redrawn, free of the driver's
overheads): ``browser: replay list`` (fetching and drawing every game of the file, as the
page opens), ``browser: move`` (a move button, until the agent's answer is drawn),
``browser: sort by diff`` (1000 rows), ``browser: step`` (the forward button).

Without ``--record FILE`` it first writes one with ``evaluate --agent best --opponent
heuristic --games 1000 --record``. ``--json`` prints the same figures for machines.

    python scripts/bench/bench_serve.py [--agent best] [--rounds 3] [--record FILE] [--browser]
        [--recording] [--json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lostcities_cfr.evaluation.recording import read_records

TARGET_MS = {
    "move": 200,
    "replay step": 100,
    "replay step (cold)": 100,
    "browser: move": 200,
    "browser: replay list": 2000,
    "browser: step": 100,
}


class Page:
    """One browser tab's connection to the server: JSON in and out, the session cookie kept."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.cookie = ""

    def request(self, method: str, path: str, body: object = None) -> tuple[float, dict]:
        """(seconds, answer) of one request; any status but 200 stops the benchmark."""
        headers = {"Cookie": self.cookie}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        start = time.perf_counter()
        self.connection.request(method, path, body=data, headers=headers)
        response = self.connection.getresponse()
        payload = response.read()
        seconds = time.perf_counter() - start
        if response.status != 200:
            raise SystemExit(f"{method} {path}: {response.status} {payload[:200]!r}")
        cookie = response.getheader("set-cookie")
        if cookie:
            self.cookie = cookie.split(";")[0]
        return seconds, json.loads(payload)


def start_server(agent: str, record: Path) -> tuple[subprocess.Popen, int, float]:
    """The server process, its port, and the seconds until it answered."""
    start = time.perf_counter()
    command = [sys.executable, "-m", "lostcities_cfr", "serve", "--agent", agent]
    command += ["--replay", str(record), "--port", "0", "--seed", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    for line in process.stdout:
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if found:  # printed just before uvicorn binds the port: wait for it
            port = int(found[1])
            while True:
                try:
                    Page(port).request("GET", "/api/info")
                    return process, port, time.perf_counter() - start
                except ConnectionRefusedError:
                    time.sleep(0.01)
    raise SystemExit(f"serve exited with status {process.wait()} before it listened")


def play_rounds(page: Page, rounds: int, rng: random.Random) -> list[float]:
    """Seconds of every move of ``rounds`` rounds (a match of three, then more)."""
    seconds: list[float] = []
    _, game = page.request("POST", "/api/games", {"seed": 0, "rounds": 3})
    for played in range(rounds):
        while not game["round_over"]:
            actions = [move["action"] for move in game["moves"]]
            draw_deck = [m["action"] for m in game["moves"] if m["label"] == "deck"]
            action = draw_deck[0] if draw_deck else rng.choice(actions)
            body = {"action": action, "turn": game["board"]["turn"]}
            took, game = page.request("POST", f"/api/games/{game['id']}/moves", body)
            seconds.append(took)
        if played + 1 < rounds:
            path = f"/api/games/{game['id']}/next-round"
            if game["match_over"]:
                _, game = page.request("POST", "/api/games", {"seed": played + 1, "rounds": 3})
            else:
                _, game = page.request("POST", path)
    return seconds


def step_replays(page: Page, steps: list[int], rng: random.Random, games: int) -> dict:
    """Seconds of opening random games (cold) and of stepping through them (warm)."""
    cold, warm = [], []
    for game in rng.sample(range(len(steps)), games):
        took, view = page.request("GET", f"/api/replays/{game}?step=0")
        cold.append(took)
        for step in [*range(1, view["steps"] + 1), *range(view["steps"] - 1, -1, -1)]:
            warm.append(page.request("GET", f"/api/replays/{game}?step={step}")[0])
    return {"replay step (cold)": cold, "replay step": warm}


def browser_timings(port: int, rng: random.Random, clicks: int = 20) -> dict[str, list[float]]:
    """Seconds from a click to the page redrawn, by the page's own clock (``lastMs``)."""
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    flags += ["--no-first-run", "--disable-background-networking", "--disable-sync"]
    flags += ["--disable-component-update", f"--user-data-dir={tempfile.mkdtemp()}"]
    for flag in flags:
        options.add_argument(flag)
    driver = webdriver.Chrome(
        service=webdriver.ChromeService("/usr/bin/chromedriver"), options=options
    )
    wait = WebDriverWait(driver, 30, poll_frequency=0.005)

    def page() -> dict:
        return driver.execute_script("return {...document.body.dataset}")

    def clicked(element, done) -> float:
        """Click ``element``, wait for ``done(page)``, return the page's seconds."""
        driver.execute_script("delete document.body.dataset.lastMs")
        element.click()
        wait.until(lambda d: "lastMs" in page() and done(page()))
        return float(page()["lastMs"]) / 1000

    timings: dict[str, list[float]] = {"replay list": [], "move": [], "sort by diff": []}
    timings["step"] = []
    try:
        driver.get(f"http://127.0.0.1:{port}/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#games tbody tr"))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "button.move"))
        timings["replay list"].append(float(page()["lastMs"]) / 1000)  # at the page's start
        for _ in range(clicks):
            wait.until(lambda d: page()["busy"] == "0")
            buttons = driver.find_elements(By.CSS_SELECTOR, "button.move")
            if not buttons:
                break
            turn = page()["turn"]
            timings["move"].append(clicked(rng.choice(buttons), lambda p, t=turn: p["turn"] != t))
        driver.find_element(By.ID, "tab-replays").click()
        diff = driver.find_element(By.CSS_SELECTOR, "th[data-key=diff]")
        timings["sort by diff"].append(clicked(diff, lambda p: True))
        first = driver.find_elements(By.CSS_SELECTOR, "#games tbody tr")[0]
        clicked(first, lambda p: p.get("replayStep") == "0")
        forward = driver.find_element(By.ID, "step-forward")
        for step in range(1, clicks + 1):
            done = lambda p, s=str(step): p["replayStep"] == s  # noqa: E731
            timings["step"].append(clicked(forward, done))
    finally:
        driver.quit()
    return {f"browser: {name}": seconds for name, seconds in timings.items()}


def recording_overhead(agent: str, repeats: int = 3) -> dict[str, list[float]]:
    """Seconds of the arena's games (``EvaluationResult.seconds``) with and without recording."""
    import torch

    from lostcities_cfr.agents import agent_from_spec
    from lostcities_cfr.evaluation.arena import evaluate
    from lostcities_cfr.evaluation.recording import GameRecorder

    torch.set_num_threads(1)
    players = agent_from_spec(agent, seed=1), agent_from_spec("heuristic", seed=2)
    evaluate(*players, 200)  # warm-up
    timings: dict[str, list[float]] = {"evaluate (plain)": [], "evaluate (recorded)": []}
    for _ in range(repeats):
        timings["evaluate (plain)"].append(evaluate(*players, 1000).seconds)
        recorded = evaluate(*players, 1000, recorder=GameRecorder()).seconds
        timings["evaluate (recorded)"].append(recorded)
    return timings


def row(name: str, seconds: list[float]) -> dict:
    ms = sorted(1000 * s for s in seconds)
    return {
        "measure": name,
        "n": len(ms),
        "median_ms": statistics.median(ms),
        "p95_ms": ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))],
        "max_ms": ms[-1],
        "target_ms": TARGET_MS.get(name),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="best", help="the agent played (best)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds played through (3)")
    parser.add_argument("--record", type=Path, help="a record file (default: write one)")
    parser.add_argument("--replays", type=int, default=5, help="games stepped through (5)")
    parser.add_argument("--browser", action="store_true", help="also time the page in Chromium")
    parser.add_argument(
        "--recording", action="store_true", help="also time evaluate with and without recording"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    record = args.record
    if record is None:
        record = Path(tempfile.mkdtemp()) / "best_vs_heuristic.jsonl"
        command = [sys.executable, "-m", "lostcities_cfr", "evaluate", "--agent", "best"]
        command += ["--opponent", "heuristic", "--games", "1000", "--record", str(record)]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    start = time.perf_counter()
    records = read_records(record)
    read_seconds = time.perf_counter() - start

    process, port, start_seconds = start_server(args.agent, record)
    try:
        page = Page(port)
        moves = play_rounds(page, args.rounds, rng)
        list_seconds, listed = page.request("GET", "/api/replays")
        assert len(listed["games"]) == len(records)
        stepping = step_replays(page, [len(r.actions) for r in records], rng, args.replays)
        browser = browser_timings(port, rng) if args.browser else {}
    finally:
        process.terminate()
        process.wait()
    rows = [
        row("move", moves),
        row("replay list", [list_seconds]),
        row("replay file read", [read_seconds]),
        *(row(name, seconds) for name, seconds in stepping.items()),
        row("server start", [start_seconds]),
        *(row(name, seconds) for name, seconds in browser.items()),
    ]
    if args.recording:
        rows += [row(name, s) for name, s in recording_overhead(args.agent).items()]
    if args.json:
        print(json.dumps({"agent": args.agent, "games": len(records), "rows": rows}, indent=2))
        return
    print(f"serve against {args.agent}; replay file of {len(records)} games ({record})")
    print(f"{'measure':22}{'n':>6}{'median ms':>12}{'p95 ms':>10}{'max ms':>10}{'target':>10}")
    for r in rows:
        target = f"< {r['target_ms']}" if r["target_ms"] else ""
        print(
            f"{r['measure']:22}{r['n']:>6}{r['median_ms']:>12.1f}{r['p95_ms']:>10.1f}"
            f"{r['max_ms']:>10.1f}{target:>10}"
        )


if __name__ == "__main__":
    main()
