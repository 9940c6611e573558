"""``python -m lostcities_cfr fit|validate``: configs, overrides, fail-fast errors, a whole run."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import torch
from pytorch_lightning.callbacks import Timer

from lostcities_cfr.baselines import PPO, ExpertIteration
from lostcities_cfr.callbacks import BestCheckpoint
from lostcities_cfr.callbacks.run_checkpoint import FINAL_FILE
from lostcities_cfr.commands import main
from lostcities_cfr.commands.fit import build_cli, run
from lostcities_cfr.training import DeepCFR, load_model

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def _built(config: Path):
    """The config's CLI, unrun; a GPU config is built for the CPU where no GPU is present."""
    here = [] if torch.cuda.is_available() else ["--trainer.accelerator", "cpu"]
    return build_cli(["--config", str(config), *here], run=False)


def test_print_config_shows_the_whole_experiment(write_config, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(write_config()), "--print_config"])
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out
    for line in (
        "rules: tiny",
        "class_path: lostcities_cfr.cfr.external_sampling.ExternalSampling",
        "traversals_per_player: 32",
        "weight_exponent: 1.0",  # a default the config does not set
        "save_last: link",
    ):
        assert line in printed


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_every_shipped_config_builds_its_model_and_trainer(config):
    cli = _built(config)
    assert isinstance(cli.model, DeepCFR | PPO | ExpertIteration)
    timed = any(isinstance(c, Timer) and c._duration for c in cli.trainer.callbacks)
    assert cli.trainer.max_epochs >= 1 or timed  # every config ends


@pytest.mark.parametrize(
    ("override", "field"),
    [
        (["--model.batch_size", "-1"], "batch_size"),
        (["--model.rules", "classik"], "rules"),
        (["--model.network", "512x9"], "network"),
        (["--model.sampler", "lostcities_cfr.cfr.nowhere.Sampler"], "sampler"),
        (["--model.traversals_per_player", "many"], "traversals_per_player"),
        (["--model.exploitability_every", "1", "--model.rules", "classic"], "exploitability"),
        (["--model.rules", "{n_colors: 0}"], "Rules.n_colors=0 is invalid"),
        (["--model.sampler.init_args.walkers", "0"], "model.sampler.walkers=0"),
        (["--model.holdout", "1"], "model.holdout=1: Not of type RightOpenUnitInterval"),
        (["--model.network.width", "0"], "model.network.width=0"),
        (["--threads", "0"], "threads=0"),
        (["--trainer.max_epochs", "-5"], "`max_epochs` must be a non-negative integer"),
        (["--trainer.accelerator", "banana"], "accelerator='banana'"),
        (["--weights_only", "false"], "weights_only=False"),
    ],
)
def test_a_bad_config_fails_before_any_work_naming_the_field(
    write_config, tmp_path, capsys, override, field
):
    with pytest.raises(SystemExit) as exit_info:
        run("fit", ["--config", str(write_config()), *override])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()  # no logs, no checkpoints: nothing ran


def test_fit_runs_end_to_end_then_validate_and_resume_use_its_checkpoint(
    write_config, tmp_path, capsys
):
    config = str(write_config(max_epochs=2, name="e2e"))
    main(["fit", "--config", config, "--model.batch_size", "32"])
    run_dir = tmp_path / "e2e"
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    assert "average vs random: 20 games" in capsys.readouterr().out  # the final evaluation

    with open(next(run_dir.rglob("metrics.csv"))) as file:
        rows = list(csv.DictReader(file))
    logged = [row for row in rows if row.get("loss/advantage_p0")]
    assert [float(row["iteration"]) for row in logged] == [1.0, 2.0]
    # The final evaluation's figures are those of the saved model's average strategy.
    final = load_model(run_dir / "checkpoints" / "last.ckpt").evaluate_deployed(20)
    assert float(rows[-1]["eval/average/random/win_rate"]) == pytest.approx(final.rounds.win_rate)
    assert float(rows[-1]["eval/average/random/score_diff"]) == pytest.approx(
        final.rounds.score_diff
    )

    main(["validate", "--config", config, "--ckpt_path", str(run_dir / "checkpoints/last.ckpt")])
    assert "eval/average/random/win_rate" in capsys.readouterr().out

    # Resuming in the same folder (config.yaml already there) continues with iteration 3.
    cli = run("fit", ["--config", config, "--trainer.max_epochs", "3", "--ckpt_path", "last"])
    assert cli.model.current_epoch == 3


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_a_config_header_names_the_file_its_run_leaves_with_the_strongest_agent(config):
    header = [line for line in config.read_text().splitlines() if line.startswith("#")]
    named = [Path(p) for line in header for p in re.findall(r"ckpt:(\S+)", line)]
    cli = _built(config)
    folder = Path(cli.trainer.checkpoint_callback.dirpath)
    best = [c for c in cli.trainer.callbacks if isinstance(c, BestCheckpoint)]
    # best.ckpt where the run selects one, else final.ckpt: the networks it measured last
    strongest = best[0].filename if best else FINAL_FILE
    assert all(path.resolve() == (folder / strongest).resolve() for path in named), named
