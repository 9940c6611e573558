"""What ``reliability.py`` replays: its cases, the rows of ``docs/reliability.md`` (a case's
number there and in ``--cases`` is its place in :data:`CASES`), and the fixtures their commands
run in. Each case is a ``python -m lostcities_cfr`` command line, run in the fixtures' folder,
with what to quote of its output, a signal to send it or variables to add to its environment;
:func:`make_fixtures` builds the files and run folders the commands name (``tiny.yaml`` and its
finished run, the Kuhn, Liar's Dice and expert iteration configs, damaged and crafted
checkpoints).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

# The training tests' tiny run (tiny rules, 32x2 networks, CSV logs), in the folder "run".
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "training"))
from tiny_training import tiny_config

TINY_CONFIG = tiny_config(Path("run"), max_epochs=2)


def folder(name: str) -> list[str]:
    """Overrides that put a run of tiny.yaml in ``name`` (its checkpoints and its logs, which
    follow the run)."""
    return ["--trainer.default_root_dir", name]


@dataclass
class Case:
    """One row: ``python -m lostcities_cfr ARGS`` (with ``stdin``), run in the fixtures.

    ``shows`` picks the line the row quotes from the output of a case that succeeds;
    ``kill`` sends that signal once the run has written its first checkpoint.
    """

    what: str
    args: list[str]
    stdin: str | None = None
    shows: str | None = None
    kill: signal.Signals | None = None
    env: dict[str, str] | None = None  # added to the environment; TAKEN_PORT: a port in use


FIT = ["fit", "--config", "tiny.yaml"]
# configs/kuhn_deep_cfr.yaml in the folder "kuhn", two iterations, CSV logs only
KUHN = ["fit", "--config", "kuhn.yaml"]
# configs/liars_dice_sdcfr.yaml, one iteration, in the folder "liars" (make_fixtures)
LIARS = ["fit", "--config", "liars.yaml"]
# configs/expert_iteration.yaml from the tiny run's networks, one small round, in the folder
# "exit"; exit-early.yaml names an unknown label in the file itself (make_fixtures)
EXIT = ["fit", "--config", "exit.yaml"]
WALKERS_16 = ["--model.sampler.init_args.walkers", "16"]
EVAL_LR = ["--model.eval_opponent", "discard-only", "--model.learning_rate", "0.002"]
# Two DDP ranks with reservoirs of 64 rows, which fill at once (rows that stand for several)
DDP = ["--trainer.devices", "2", "--trainer.strategy", "ddp"]
DDP += ["--model.advantage_buffer_size", "64"]
TAKEN_PORT = "<a port another process listens on>"
# A sweep of tiny.yaml, one iteration a trial (its metric: the strategy network's loss)
SWEEP = ["sweep", "--config", "tiny.yaml", "--trainer.max_epochs", "1"]
SWEEP += ["--metric", "loss/strategy", "--out"]
# The training tests' callbacks (run_probes.KillRankAt) for the runs to import.
PROBES = {"PYTHONPATH": "tests/training"}  # below the repository's root
ROOT = Path(__file__).resolve().parents[2]
CASES = [
    Case("a new run into a used folder", FIT),
    Case(
        "a resume that changes what made the checkpoint",
        [*FIT, "--ckpt_path", "last", "--trainer.max_epochs", "3", "--model.network.width", "64"],
    ),
    Case(
        "a resume with another seed and sampler",
        [*FIT, "--ckpt_path", "last", "--seed_everything", "8", *WALKERS_16],
    ),
    Case(
        "a resume that changes the evaluation and learning rate (honoured)",
        [*FIT, *folder("resumable"), "--ckpt_path", "last", "--trainer.max_epochs", "3", *EVAL_LR],
        shows=r"average vs discard-only",
    ),
    Case("--ckpt_path last with no checkpoint", [*FIT, *folder("fresh"), "--ckpt_path", "last"]),
    Case(
        "--ckpt_path last_if_present with no checkpoint (starts afresh)",
        [*FIT, *folder("fresh"), "--ckpt_path", "last_if_present", "--trainer.max_epochs", "1"],
        shows=r"average vs random: \d+ games",
    ),
    Case(
        "--ckpt_path last whose file is gone",
        [*FIT, *folder("dangling"), "--ckpt_path", "last", "--trainer.max_epochs", "3"],
    ),
    Case("--ckpt_path to no file", [*FIT, *folder("other"), "--ckpt_path", "nowhere.ckpt"]),
    Case("--ckpt_path 'best' (no such checkpoint here)", [*FIT, "--ckpt_path", "best"]),
    Case("a pickle-bomb checkpoint", [*FIT, *folder("other"), "--ckpt_path", "bomb.ckpt"]),
    Case("a truncated checkpoint", [*FIT, *folder("other"), "--ckpt_path", "truncated.ckpt"]),
    Case("a text file as checkpoint", [*FIT, *folder("other"), "--ckpt_path", "text.ckpt"]),
    Case(
        "a checkpoint with a NaN weight",
        [*FIT, *folder("nan-run"), "--ckpt_path", "nan-weight.ckpt", "--trainer.max_epochs", "3"],
    ),
    Case(
        "a checkpoint with an infinite reservoir row (a flipped bit)",
        [*FIT, *folder("inf-run"), "--ckpt_path", "inf-row.ckpt", "--trainer.max_epochs", "3"],
    ),
    Case(
        "a diverging learning rate (the loss turns NaN)",
        [*FIT, *folder("diverging"), "--trainer.max_epochs", "4", "--model.learning_rate", "1e30"],
    ),
    Case("a save folder below a file", [*FIT, *folder("tiny.yaml/run")]),
    Case("invalid rules", [*FIT, *folder("other"), "--model.rules", "{n_colors: 0}"]),
    Case("unknown rules preset", [*FIT, *folder("other"), "--model.rules", "classik"]),
    Case("a negative batch size", [*FIT, *folder("other"), "--model.batch_size", "-1"]),
    Case(
        "a learning rate that is no number",
        [*FIT, *folder("other"), "--model.learning_rate", "abc"],
    ),
    Case(
        "a sampler argument out of range",
        [*FIT, *folder("other"), "--model.sampler.init_args.walkers", "0"],
    ),
    Case("negative max_epochs", [*FIT, *folder("other"), "--trainer.max_epochs", "-5"]),
    Case("an unknown accelerator", [*FIT, *folder("other"), "--trainer.accelerator", "banana"]),
    Case("zero devices", [*FIT, *folder("other"), "--trainer.devices", "0"]),
    Case("zero threads", [*FIT, *folder("other"), "--threads", "0"]),
    Case("unsafe loading asked for", [*FIT, *folder("other"), "--weights_only", "false"]),
    Case(
        "validate with another network than the checkpoint's",
        ["validate", "--config", "tiny.yaml", "--ckpt_path", "last", "--model.network.width", "64"],
    ),
    Case(
        "SIGKILL during a run",
        [*FIT, *folder("killed"), "--trainer.max_epochs", "200"],
        kill=signal.SIGKILL,
    ),
    Case(
        "... then resumed",
        [*FIT, *folder("killed"), "--ckpt_path", "last", "--trainer.max_epochs", "30"],
        shows=r"average vs random: \d+ games",
    ),
    Case(
        "a resume with max_epochs below the iterations run",
        [*FIT, "--ckpt_path", "last", "--trainer.max_epochs", "1"],
    ),
    Case(
        "SIGINT (Ctrl-C) during a run",
        [*FIT, *folder("interrupted"), "--trainer.max_epochs", "100000"],
        kill=signal.SIGINT,
    ),
    Case(
        "a run ended by its time limit between two checkpoints",
        [
            *FIT,
            *folder("timed"),
            "--trainer.max_epochs",
            "100000",
            "--trainer.max_time",
            "00:00:00:05",
            "--checkpoint.every_n_epochs",
            "1000",
        ],
        shows=r"Final evaluation of iteration",
    ),
    Case(
        "a checkpoint of other rules (tiny) in a classic game",
        ["evaluate", "--agent", "ckpt:run/checkpoints/last.ckpt"],
    ),
    Case(
        "the same checkpoint under its own rules",
        [
            "evaluate",
            "--agent",
            "ckpt:run/checkpoints/last.ckpt",
            "--rules",
            "tiny",
            "--games",
            "20",
        ],
        shows=r"ckpt:run/checkpoints/last.ckpt vs random: 20 games",
    ),
    Case("a pickle-bomb checkpoint as an agent", ["evaluate", "--agent", "ckpt:bomb.ckpt"]),
    Case("a truncated checkpoint as an agent", ["evaluate", "--agent", "ckpt:truncated.ckpt"]),
    Case(
        "a checkpoint with a NaN weight as an agent",
        ["evaluate", "--agent", "ckpt:nan-weight.ckpt", "--rules", "tiny"],
    ),
    Case(
        "a checkpoint naming a sampler class outside the package",
        ["evaluate", "--agent", "ckpt:foreign-class.ckpt", "--rules", "tiny"],
    ),
    Case("a checkpoint path to no file", ["evaluate", "--agent", "ckpt:nowhere.ckpt"]),
    Case(
        "two policies in one spec",
        ["evaluate", "--agent", "ckpt:run/checkpoints/last.ckpt:average:current"],
    ),
    Case("an unknown agent kind", ["evaluate", "--agent", "alphazero"]),
    Case("zero games", ["evaluate", "--agent", "random", "--games", "0"]),
    Case("a device that does not exist", ["evaluate", "--agent", "random", "--device", "banana"]),
    Case("CUDA on a machine without it", ["evaluate", "--agent", "random", "--device", "cuda:3"]),
    Case(
        "play a checkpoint of other rules",
        ["play", "--opponent", "ckpt:run/checkpoints/last.ckpt"],
        stdin="1\n",
    ),
    Case(
        "unparseable moves in play ('²', 'x', '0')",
        ["play", "--opponent", "random", "--seed", "1"],
        stdin="²\nx\n0\nq\n",
        shows=r"'²' is not a move",
    ),
    Case("an unknown heuristic preset", ["play", "--opponent", "heuristic:reckless"], stdin="q\n"),
    Case("report of a folder without metrics", ["report", "nowhere"]),
    Case(
        "report of a resumed run (two csv versions)",
        ["report", "resumable"],
        shows=r"^iterations",
    ),
    Case(
        "a new folder for a run whose logger still logs into a used one",
        [*FIT, "--trainer.default_root_dir", "moved-only"],
    ),
    Case(
        "CUDA graphs for the updates on a CPU",
        [*FIT, *folder("graphs"), "--model.update_graphs", "true"],
    ),
    Case(
        "an unknown game",
        [*FIT, *folder("poker"), "--model.rules", "lostcities_cfr.game.poker.NoPoker"],
    ),
    Case("nashconv of an unknown game", ["nashconv", "--agent", "uniform", "--game", "pokr"]),
    Case(
        "a Lost Cities-only network on poker",
        [
            *KUHN,
            "--trainer.default_root_dir",
            "kuhn-colors",
            "--model.network.architecture",
            "colors",
        ],
    ),
    Case(
        "a Lost Cities agent on poker",
        ["nashconv", "--agent", "heuristic:cautious", "--game", "kuhn_poker"],
    ),
    Case(
        "a checkpoint of one game measured on another",
        ["nashconv", "--agent", "ckpt:run/checkpoints/last.ckpt", "--game", "leduc_poker"],
    ),
    Case(
        "a poker checkpoint in Lost Cities' arena",
        ["evaluate", "--agent", "ckpt:kuhn/checkpoints/last.ckpt", "--games", "2"],
    ),
    Case(
        "nashconv of the classic game (too large)",
        ["nashconv", "--agent", "random", "--game", "classic"],
    ),
    Case(
        "several hosts with no rendezvous in the environment",
        [*FIT, *folder("nodes"), "--trainer.num_nodes", "2"],
    ),
    Case(
        "a MASTER_PORT another process listens on",
        [*FIT, *folder("port"), *DDP],
        env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": TAKEN_PORT},
    ),
    Case(
        "a DDP rank killed (SIGKILL) mid-run",
        [
            *FIT,
            *folder("ddp"),
            *DDP,
            "--trainer.max_epochs",
            "3",
            "--trainer.callbacks+={class_path: run_probes.KillRankAt, init_args: {rank: 1, iteration: 3}}",
        ],
        env=PROBES,
    ),
    Case(
        "... then resumed on its 2 ranks",
        [*FIT, *folder("ddp"), *DDP, "--ckpt_path", "last", "--trainer.max_epochs", "3"],
        shows=r"average vs random: \d+ games",
    ),
    Case(
        "... or on 1 rank, its reservoirs full",
        [
            *FIT,
            *folder("ddp"),
            "--model.advantage_buffer_size",
            "64",
            "--ckpt_path",
            "last",
            "--trainer.max_epochs",
            "4",
        ],
    ),
    Case(
        "nashconv of tiny Lost Cities (walked whole)",
        ["nashconv", "--agent", "ckpt:run/checkpoints/last.ckpt"],
        shows=r"NashConv",
    ),
    Case(
        "DCFR's discount on sampled regret targets",
        [*KUHN, "--trainer.default_root_dir", "kuhn-alpha", "--model.discount_alpha", "1.5"],
    ),
    Case(
        "predictive weights on cumulative regret targets",
        [
            *KUHN,
            *("--trainer.default_root_dir", "kuhn-predictive", "--model.predictive", "true"),
            *("--model.regret_targets", "cumulative"),
        ],
    ),
    Case(
        "sweep: an unknown parameter in --set",
        [*SWEEP, "sweep-set", "--set", "model.no_such_field=1,2"],
    ),
    Case(
        "sweep: a search over an unknown parameter",
        [*SWEEP, "sweep-search", "--search", "model.no_such_field=0.1:1", "--trials", "2"],
    ),
    Case(
        "sweep: a metric the run never logs",
        [*SWEEP, "sweep-metric", "--seeds", "1", "--metric", "loss/strategi"],
    ),
    Case(
        "sweep: a storage URL that cannot be reached",
        [*SWEEP, "sweep-storage", "--storage", "postgresql+psycopg2://nobody@127.0.0.1:9/none"],
    ),
    Case(
        "sweep: one trial, then its folder reused",
        [*SWEEP, "sweep-reused", "--seeds", "1"],
        shows=r"trial 0 complete",
    ),
    Case(
        "... by a sweep of another experiment (kept)",
        [*SWEEP, "sweep-reused", "--seeds", "1", "--set", "model.learning_rate=0.01"],
    ),
    Case(
        "fit: Liar's Dice for three players (the engine takes two)",
        [*LIARS, "--model.rules.init_args.players", "3"],
    ),
    Case(
        "fit: Liar's Dice with dice of no sides",
        [*LIARS, "--model.rules.init_args.dice_sides", "0"],
    ),
    Case(
        "nashconv of Liar's Dice (walked whole on the batched engine)",
        ["nashconv", "--agent", "uniform", "--game", "liars_dice"],
        shows=r"NashConv",
    ),
    Case(
        "expert iteration from a base of another game (Kuhn poker)",
        [*EXIT, *folder("exit-bad"), "--model.init_args.base", "ckpt:kuhn/checkpoints/last.ckpt"],
    ),
    Case(
        "expert iteration's soft targets from an agent without probabilities",
        [*EXIT, *folder("exit-bad"), "--model.init_args.base", "heuristic:balanced"],
    ),
    Case(
        "expert iteration resumed with another search",
        [
            *EXIT,
            "--ckpt_path",
            "last",
            "--trainer.max_epochs",
            "2",
            "--model.init_args.worlds",
            "3",
        ],
    ),
    Case(
        "expert iteration with an unknown label in its config",
        ["fit", "--config", "exit-early.yaml"],
    ),
]


def make_fixtures(work: Path) -> None:
    """tiny.yaml, a finished run in ``run``, its copies and the damaged checkpoints."""
    (work / "tiny.yaml").write_text(yaml.safe_dump(TINY_CONFIG))
    done = subprocess.run(
        [sys.executable, "-m", "lostcities_cfr", *FIT], cwd=work, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"the fixture run failed:\n{done.stderr[-3000:]}")
    kuhn = yaml.safe_load((ROOT / "configs/kuhn_deep_cfr.yaml").read_text())
    kuhn["trainer"].update(max_epochs=2, default_root_dir="kuhn", logger=False)
    (work / "kuhn.yaml").write_text(yaml.safe_dump(kuhn))
    done = subprocess.run(
        [sys.executable, "-m", "lostcities_cfr", *KUHN], cwd=work, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"the Kuhn fixture run failed:\n{done.stderr[-3000:]}")
    liars = yaml.safe_load((ROOT / "configs/liars_dice_sdcfr.yaml").read_text())
    liars["trainer"].update(max_epochs=1, default_root_dir="liars", logger=False)
    (work / "liars.yaml").write_text(yaml.safe_dump(liars))
    expert = yaml.safe_load((ROOT / "configs/expert_iteration.yaml").read_text())
    # no periodic evaluation: it plays best, on the classic rules
    expert["trainer"].update(max_epochs=1, default_root_dir="exit", logger=False, callbacks=[])
    expert["model"]["init_args"].update(
        base="ckpt:run/checkpoints/final.ckpt",
        games_per_round=4,
        worlds=2,
        top=2,
        updates_per_round=2,
        minibatch_size=32,
        buffer_capacity=1000,
    )
    (work / "exit.yaml").write_text(yaml.safe_dump(expert))
    done = subprocess.run(
        [sys.executable, "-m", "lostcities_cfr", *EXIT], cwd=work, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"the expert iteration fixture run failed:\n{done.stderr[-3000:]}")
    expert["trainer"]["default_root_dir"] = "exit-bad"
    expert["model"]["init_args"]["label"] = "early"
    (work / "exit-early.yaml").write_text(yaml.safe_dump(expert))
    for copy in ("resumable", "dangling"):
        shutil.copytree(work / "run", work / copy, symlinks=True)
    (work / "dangling" / "checkpoints" / "last.ckpt").resolve().unlink()
    last = work / "run" / "checkpoints" / "last.ckpt"

    class OpenOnLoad:  # unpickled unsafely, it would create the file code-ran
        def __reduce__(self):
            return (open, (str(work / "code-ran"), "w"))

    torch.save({"state_dict": {}, "payload": OpenOnLoad()}, work / "bomb.ckpt")
    data = last.read_bytes()
    (work / "truncated.ckpt").write_bytes(data[: len(data) // 2])
    (work / "text.ckpt").write_text("not a checkpoint\n")
    checkpoint = torch.load(last, weights_only=True)
    checkpoint["state_dict"]["strategy_net.head.bias"][0] = float("nan")
    torch.save(checkpoint, work / "nan-weight.ckpt")
    checkpoint = torch.load(last, weights_only=True)
    checkpoint["deep_cfr"]["strategy_buffer"]["targets"][5, 3] = float("inf")
    torch.save(checkpoint, work / "inf-row.ckpt")
    checkpoint = torch.load(last, weights_only=True)
    checkpoint["hyper_parameters"]["sampler"]["class_path"] = "my_samplers.MySampler"
    torch.save(checkpoint, work / "foreign-class.ckpt")
