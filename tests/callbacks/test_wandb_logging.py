"""An offline W&B run through LightningCLI, read back from its files."""

import json
from pathlib import Path

import pytest
import wandb
import yaml
from pytorch_lightning.cli import LightningCLI
from tiny_runs import DESIGN_METRICS, EVAL_SUFFIXES, tiny_cli_model
from wandb_records import config, history, metric_definitions, run_file

from lostcities_cfr.callbacks import SaveConfigToLoggers
from lostcities_cfr.callbacks.evaluation import TABLE_COLUMNS
from lostcities_cfr.training import DeepCFR

RUN = {
    "seed_everything": 0,
    "trainer": {
        "max_epochs": 2,
        "enable_checkpointing": False,
        "enable_model_summary": False,
        "enable_progress_bar": False,
        "logger": [
            {"class_path": "lostcities_cfr.callbacks.IterationWandbLogger"},
            {"class_path": "pytorch_lightning.loggers.CSVLogger", "init_args": {"name": "csv"}},
        ],
        "callbacks": [
            {
                "class_path": "lostcities_cfr.callbacks.PeriodicEvaluation",
                "init_args": {"every_n_iterations": 2, "games": 10, "opponents": ["random"]},
            },
            {"class_path": "lostcities_cfr.callbacks.PhaseTimer"},
        ],
    },
    "model": tiny_cli_model(),
}


@pytest.fixture(scope="module")
def wandb_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("wandb")
    run = json.loads(json.dumps(RUN))
    run["trainer"]["default_root_dir"] = str(tmp_path)
    for logger in run["trainer"]["logger"]:
        logger.setdefault("init_args", {})["save_dir"] = str(tmp_path)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(run))
    with pytest.MonkeyPatch.context() as env:
        # WandbLogger(offline=True) sets WANDB_MODE itself; the context restores it.
        env.setenv("WANDB_MODE", "offline")
        cli = LightningCLI(
            DeepCFR,
            args=["fit", "--config", str(path)],
            save_config_callback=SaveConfigToLoggers,
            auto_configure_optimizers=False,
        )
        wandb.finish()  # writes the run's last records; a script's exit does it itself
    return cli, run_file(tmp_path)


def test_every_metric_is_charted_against_the_cfr_iteration(wandb_run):
    _, path = wandb_run
    globs = {m.glob_name: m.step_metric for m in metric_definitions(path) if m.glob_name}
    assert globs["*"] == "iteration"


def test_history_holds_the_design_page_metrics_per_iteration(wandb_run):
    _, path = wandb_run
    rows = [row for row in history(path) if "time/iteration_s" in row]
    assert [row["iteration"] for row in rows] == [1, 2]
    for row in rows:
        assert not [name for name in DESIGN_METRICS if name not in row]
    for policy in ("average", "current"):
        for suffix in EVAL_SUFFIXES:
            assert f"eval/{policy}/random/{suffix}" in rows[1]


def test_the_results_table_is_logged_at_the_evaluated_iteration(wandb_run):
    _, path = wandb_run
    (row,) = [row for row in history(path) if "eval/results/path" in row]
    assert row["iteration"] == 2
    table_path = path.parent / "files" / row["eval/results/path"]
    table = json.loads(table_path.read_text())
    assert table["columns"] == TABLE_COLUMNS
    assert sorted(r[1] for r in table["data"]) == ["average", "current"]


def test_the_full_config_is_stored_with_the_run(wandb_run):
    cli, path = wandb_run
    stored = config(path)
    assert stored["trainer"]["max_epochs"] == 2
    assert stored["model"]["traversals_per_player"] == 16
    callbacks = stored["trainer"]["callbacks"]
    assert callbacks[0]["class_path"] == "lostcities_cfr.callbacks.PeriodicEvaluation"
    saved = yaml.safe_load((Path(cli.trainer.log_dir) / "config.yaml").read_text())
    assert saved["model"]["batch_size"] == 32
