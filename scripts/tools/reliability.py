"""Every bad input and fault of ``docs/reliability.md``, replayed: what a user sees, what is lost.

Builds its fixtures in a fresh folder (a finished two-iteration tiny run, copies of it,
damaged and crafted checkpoints), runs every case's command there as a new process, as a
user would, and prints one row per case: the command, its exit status, the line the user
reads, whether a traceback appeared, and what became of the runs' checkpoints (the iteration
each ``last.ckpt`` holds, before and after). A case that is not a bad input (a resume with
overrides, a run killed and resumed) shows the line that proves it did what it says.
The cases and their fixtures are ``reliability_cases.py``'s (beside this file); this file
runs them and tables what they did.

    python scripts/tools/reliability.py                  # the markdown table of docs/reliability.md
    python scripts/tools/reliability.py --json           # the same rows for machines
    python scripts/tools/reliability.py --keep DIR       # keep the fixtures in DIR to replay by hand

It takes a few minutes on two cores (each case starts Python and imports Lightning).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reliability_cases import CASES, ROOT, TAKEN_PORT, Case, make_fixtures

from lostcities_cfr.callbacks.run_checkpoint import FINAL_FILE
from lostcities_cfr.training.checkpoint import read_checkpoint, trained_iterations


def last_iterations(work: Path) -> dict[str, int | str]:
    """The iteration each run folder's last.ckpt holds ("unreadable" if it does not load)."""
    found: dict[str, int | str] = {}
    for last in sorted(work.glob("*/checkpoints/last.ckpt")):
        try:
            found[last.parent.parent.name] = trained_iterations(read_checkpoint(last))
        except Exception:
            found[last.parent.parent.name] = "unreadable" if last.exists() else "missing"
    return found


def run_case(case: Case, work: Path, taken_port: int) -> dict:
    before = last_iterations(work)
    command = [sys.executable, "-m", "lostcities_cfr", *case.args]
    added = {k: str(taken_port) if v == TAKEN_PORT else v for k, v in (case.env or {}).items()}
    if "PYTHONPATH" in added:
        added["PYTHONPATH"] = str(ROOT / added["PYTHONPATH"])
    env = {**os.environ, **added}
    if case.kill is None:
        done = subprocess.run(
            command,
            cwd=work,
            input=case.stdin or "",
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        status, output, err = done.returncode, done.stdout + done.stderr, done.stderr
    else:
        status, output, err = _killed(case, command, work)
    after = last_iterations(work)
    if case.shows is not None and status == 0:
        seen = next((line for line in output.splitlines() if re.search(case.shows, line)), "")
    else:
        lines = [line.strip() for line in err.splitlines() if line.strip()]
        # Our commands' one line, or jsonargparse's "error:" line with the reason after it.
        marks = [i for i, line in enumerate(lines) if re.search(r"(^|: )error:", line)]
        if marks:
            at = marks[-1]
            seen = " ".join(lines[at : at + 2]) if lines[at].endswith(":") else lines[at]
        else:
            seen = lines[-1] if lines else ""
    changes = [
        f"{name}: last.ckpt {before.get(name, 'none')} → {after.get(name, 'none')}"
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    ]
    went_back = [
        name
        for name, iteration in before.items()
        if not isinstance(after.get(name), int) or after[name] < iteration
    ]
    return {
        "what": case.what,
        "command": _shown(case),
        "status": status,
        "shows": seen.strip(),
        "traceback": "Traceback (most recent call last)" in output,
        "checkpoints": "; ".join(changes) or "unchanged",
        "lost": ", ".join(went_back) or "nothing",
    }


def _killed(case: Case, command: list[str], work: Path) -> tuple[int, str, str]:
    """Start the run, send ``case.kill`` once its first checkpoint exists, wait for it."""
    run_dir = work / case.args[case.args.index("--trainer.default_root_dir") + 1]
    process = subprocess.Popen(
        command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 300
    while not (run_dir / "checkpoints" / "last.ckpt").exists():
        if process.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    process.send_signal(case.kill)
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # a row that says so, rather than no table
        process.kill()
        out, err = process.communicate()
        # What the run printed of the interrupt, if anything (an exception ignored in a
        # finaliser, say), then the note that ends the row.
        said = [line for line in err.splitlines() if "Interrupt" in line or "ignored" in line]
        err += "\n" + " ".join(said[-2:]) + f" (still running 120 s after {case.kill.name}: killed)"
    iteration = last_iterations(work).get(run_dir.name, "none")
    final = run_dir / "checkpoints" / FINAL_FILE
    networks = trained_iterations(read_checkpoint(final)) if final.is_file() else "none"
    err += (
        f"\n(after {case.kill.name}: last.ckpt holds iteration {iteration}, "
        f"{FINAL_FILE} the networks of iteration {networks})"
    )
    return process.returncode, out + err, err


def _shown(case: Case) -> str:
    text = "python -m lostcities_cfr " + shlex.join(case.args)
    if case.env:
        text = " ".join(f"{k}={v}" for k, v in case.env.items()) + " " + text
    if case.stdin is not None:
        text = "printf '" + case.stdin.replace("\n", "\\n") + f"' | {text}"
    if case.kill is not None:
        text += f"  # {case.kill.name} after its first checkpoint"
    return text


def markdown(rows: list[dict]) -> str:
    lines = [
        "| # | case | command | exit | what the user sees | traceback | last.ckpt (iteration) | lost |",
        "|---:|---|---|---:|---|---|---|---|",
    ]
    for row in rows:
        cells = [
            str(row["case"]),
            row["what"],
            f"`{row['command']}`",
            str(row["status"]),
            row["shows"].replace("|", "\\|"),
            "yes" if row["traceback"] else "no",
            row["checkpoints"],
            row["lost"],
        ]
        lines.append("| " + " | ".join(cell.replace("\n", " ") for cell in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON list instead")
    parser.add_argument(
        "--keep", type=Path, default=None, help="build the fixtures here, keep them"
    )
    parser.add_argument(
        "--cases",
        type=int,
        nargs="+",
        metavar="N",
        help=f"run only these cases, by their number in the table (1 to {len(CASES)})",
    )
    args = parser.parse_args()
    numbers = args.cases or range(1, len(CASES) + 1)
    unknown = [n for n in numbers if not 1 <= n <= len(CASES)]
    if unknown:
        parser.error(f"--cases {unknown[0]}: expected a case number from 1 to {len(CASES)}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="lostcities-reliability-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        make_fixtures(work)
        with socket.socket() as taken:  # listened on for the case of a port in use
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            rows = [{"case": n, **run_case(CASES[n - 1], work, port)} for n in numbers]
        if (work / "code-ran").exists():
            rows.append(
                {
                    "case": 0,
                    "what": "THE PICKLE BOMB RAN",
                    "command": "",
                    "status": "",
                    "shows": "",
                    "traceback": False,
                    "checkpoints": "",
                    "lost": "code ran",
                }
            )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(rows, indent=2, ensure_ascii=False) if args.json else markdown(rows))
    tracebacks = sum(row["traceback"] for row in rows)
    print(f"\n{len(rows)} cases, {tracebacks} with a traceback", file=sys.stderr)


if __name__ == "__main__":
    main()
