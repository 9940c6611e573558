"""Every benchmark and tool under ``scripts/`` runs, on work small enough for the suite.

Each row runs one script's ``main`` in this process as ``python scripts/<folder>/<name>.py
ARGS`` would, on a few games, rows or seconds, and checks the figures it prints are there
and sane: the figures are the scripts', not the test's. Scripts with a test file of their
own (``test_<name>.py`` here) are covered there; :func:`test_every_script_has_a_test` keeps
it that way for scripts added later. The whole reliability table is ``slow`` (minutes); two
of its cases run by default.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from conftest import FOLDERS, SCRIPTS

REPO = SCRIPTS.parent
OLD_CHECKPOINT = REPO / "tests" / "data" / "tiny_run_before_layout_move.ckpt"
sys.path.insert(0, str(REPO / "tests" / "training"))
from tiny_training import tiny_config  # noqa: E402

Check = Callable[[str], bool]


def figures(check: Callable[[dict], bool]) -> Check:
    """The printed JSON, checked by ``check``."""
    return lambda out: check(json.loads(out))


RUNS: dict[str, tuple[str, Check]] = {  # script: (its arguments, what it must print)
    "ab_engine": (
        "--base HEAD --batch 8 --rounds 1",
        lambda out: "current/base" in out and "encode" in out,
    ),
    "bench_arena": (
        "--games 4 --threads 1 --json",
        figures(lambda f: all(r["games"] == 4 and r["games_per_s"] > 0 for r in f["rows"])),
    ),
    "bench_engine": (
        "--repeats 1 --sizes 1 8 --threads 1 --json",
        figures(lambda f: [r["batch"] for r in f["batched"]] == [1, 8]),
    ),
    "bench_eval": (
        "--games 4 --every 5 --opponents random --policies average --iteration-seconds 1 --json",
        figures(lambda f: f["amortized"][0]["eval_s_per_iteration"] > 0),
    ),
    "bench_liars_dice": (
        "--games 8 --walks 1 --repeats 1 --json",
        figures(lambda f: all(r["nodes"] > 0 and r["ratio"] > 0 for r in f["rows"])),
    ),
    "bench_network": (
        "--presets 512x3 --dtypes float32 --backends eager --batch 8 --local-rows 2 "
        "--threads 1 --seconds 0.01 --json",
        figures(lambda f: {r["mode"] for r in f["results"]} == {"eager", "local (eager)"}),
    ),
    "bench_overhead": (
        "--walkers 2 --batches 32 --kernels foreach --repeats 1 --json",
        figures(lambda f: f["traversal"][0]["nodes_per_s"] > 0 and f["updates"][0]["batch"] == 32),
    ),
    "bench_rollout": (
        "--games 4 --repeats 1 --json",
        figures(lambda f: f["results"][0]["decisions_per_s"] > 0),
    ),
    "bench_serve": (
        "--agent heuristic --rounds 1 --replays 1 --json",
        figures(lambda f: any(r["measure"] == "move" and r["n"] > 0 for r in f["rows"])),
    ),
    "bench_signal": (
        "--network 16x1 --walkers 4 --seconds 0.1 --rounds 1 --states 2 --repeats 2 --json",
        figures(lambda f: all(s["rows_per_s"] > 0 for s in f["samplers"].values())),
    ),
    "checkpoint_memory": (
        "--rows 100 --json",
        figures(lambda f: f["streaming"]["save_peak_bytes"] < f["lightning"]["save_peak_bytes"]),
    ),
    "padding_share": (
        "--buckets 64 --traversals 2",
        lambda out: re.search(r"buckets \[64\]: [\d,]+ forwards", out) is not None,
    ),
    "strength_table": (
        "--agent h=heuristic --opponent random --games 4 --json",
        figures(lambda f: f["agents"]["h"]["random"]["games"] == 4),
    ),
    "reliability": (
        "--cases 1 40 --json",
        figures(lambda f: [r["case"] for r in f] == [1, 40] and not any(r["traceback"] for r in f)),
    ),
}


def run_script(load_script, monkeypatch, capsys, name: str, argv: list[str]) -> str:
    script = load_script(name)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv])
    script.main()
    return capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_script_runs_and_prints_its_figures(name, load_script, monkeypatch, capsys):
    argv, check = RUNS[name]
    assert check(run_script(load_script, monkeypatch, capsys, name, argv.split()))


@pytest.mark.slow
def test_every_reliability_case_runs_without_a_traceback(load_script, monkeypatch, capsys):
    rows = json.loads(run_script(load_script, monkeypatch, capsys, "reliability", ["--json"]))
    assert rows and not any(row["traceback"] for row in rows)


def test_bench_ddp_times_one_rank_and_two_with_half_the_updates(
    load_script, monkeypatch, capsys, tmp_path
):
    config = tiny_config(tmp_path / "unused", max_epochs=2)
    del config["trainer"]["default_root_dir"], config["trainer"]["logger"]
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(config))
    argv = ["--config", str(tmp_path / "tiny.yaml"), "--iterations", "2", "--layouts", "1,2u"]
    results = json.loads(
        run_script(load_script, monkeypatch, capsys, "bench_ddp", [*argv, "--json"])
    )
    assert set(results) == {"1", "2u"} and all(r["nodes_per_s"] > 0 for r in results.values())


def test_bench_batch_scores_settings_on_held_out_rows(load_script, monkeypatch, capsys, tmp_path):
    from lostcities_cfr.commands.fit import run

    config = tiny_config(tmp_path / "run", max_epochs=1, holdout=0.2)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(config))
    run("fit", ["--config", str(tmp_path / "tiny.yaml")])
    capsys.readouterr()  # the run's own report
    checkpoint = str(next((tmp_path / "run" / "checkpoints").glob("epoch=*.ckpt")))
    argv = [checkpoint, "--settings", "16:0.001:2", "32:0.001:1", "--json"]
    result = json.loads(run_script(load_script, monkeypatch, capsys, "bench_batch", argv))
    assert result["held_out_rows"] > 0 and [r["rows_seen"] for r in result["rows"]] == [32, 32]


def test_export_agent_keeps_the_moves(load_script, monkeypatch, capsys, tmp_path):
    argv = [str(OLD_CHECKPOINT), str(tmp_path / "agent.pt"), "--json"]
    result = json.loads(run_script(load_script, monkeypatch, capsys, "export_agent", argv))
    assert result["same_moves"] and 0 < result["out_bytes"] < result["source_bytes"]


def test_train_belief_writes_a_network(load_script, monkeypatch, capsys, tmp_path):
    out = tmp_path / "belief.pt"
    argv = ["--out", str(out), "--games", "8", "--validation-games", "4", "--epochs", "1"]
    run_script(
        load_script, monkeypatch, capsys, "train_belief", [*argv, "--width", "8", "--depth", "1"]
    )
    assert out.stat().st_size > 0


def scripts() -> list[Path]:
    """Every runnable script (a helper module such as ``tables.py`` has no ``__main__``)."""
    found = [p for folder in FOLDERS for p in (SCRIPTS / folder).glob("*.py")]
    return [p for p in found if 'if __name__ == "__main__":' in p.read_text()]


def test_every_script_has_a_test():
    here = Path(__file__).parent
    own_files = {p.stem.removeprefix("test_") for p in here.glob("test_*.py")}
    tested = set(RUNS) | own_files | {"bench_ddp", "bench_batch", "export_agent", "train_belief"}
    assert sorted(p.stem for p in scripts() if p.stem not in tested) == []


def test_every_script_the_docs_quote_exists():
    quoted = set()
    for page in [REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "scripts" / "README.md"]:
        quoted |= set(re.findall(r"(?<![\w/])scripts/[\w/]+\.(?:py|sh)", page.read_text()))
    assert quoted and sorted(q for q in quoted if not (REPO / q).exists()) == []
