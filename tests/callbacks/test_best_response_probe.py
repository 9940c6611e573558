"""BestResponseProbe: a small best response to the deployed policy, logged as exploit/*."""

import csv

import pytest
import yaml
from tiny_runs import fit, read_csv_metrics, tiny_cli_model, tiny_model

from lostcities_cfr.callbacks import BestResponseProbe
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.commands.fit import run
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.training import metrics

SMALL = {"iterations": 25, "games_per_rollout": 64, "games": 200, "network": NetworkConfig(32, 2)}


def test_probes_log_documented_exploit_metrics_and_training_goes_on(tmp_path):
    probe = BestResponseProbe(every_n_iterations=2, **SMALL)
    trainer, _ = fit(tmp_path, [probe], max_epochs=3, model=tiny_model(deploy="current"))
    rows = read_csv_metrics(trainer)
    probed = {int(row["iteration"]): row for row in rows if "exploit/score_diff" in row}
    assert sorted(probed) == [2, 3]  # every 2nd iteration and the last
    for row in probed.values():
        assert row["exploit/score_diff_ci_low"] < row["exploit/score_diff"]
        assert row["exploit/score_diff"] < row["exploit/score_diff_ci_high"]
        assert 0 <= row["exploit/win_rate_ci_low"] <= row["exploit/win_rate_ci_high"] <= 1
        assert row["exploit/seconds"] > 0
        assert all(metrics.documented(name) for name in row)
    # the run trained on after probing: every iteration logged its losses
    assert {int(r["iteration"]) for r in rows if "loss/strategy" in r} == {1, 2, 3}


def test_the_probe_answers_the_policy_the_run_deploys(tmp_path):
    # Iteration 1's current policy is uniform (exploitability 2.42 on tiny rules): a best
    # response of 25 small iterations already wins clearly against it.
    probe = BestResponseProbe(every_n_iterations=1, **SMALL)
    trainer, _ = fit(tmp_path, [probe], max_epochs=1, model=tiny_model(deploy="current"))
    (row,) = [r for r in read_csv_metrics(trainer) if "exploit/score_diff" in r]
    assert row["exploit/score_diff_ci_low"] > 1.0


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("games_per_rollout", 1, "games_per_rollout=1"),
        ("clone_iterations", 25, "clone_iterations=25"),
        ("every_n_iterations", 0, "every_n_iterations"),
    ],
)
def test_refuses_settings_that_cannot_probe(field, value, message):
    with pytest.raises(ConfigError, match=message):
        BestResponseProbe(**(SMALL | {field: value}))


def test_a_run_config_names_the_probe_by_its_class_path(tmp_path):
    config = {
        "trainer": {
            "max_epochs": 1,
            "default_root_dir": str(tmp_path),
            "enable_model_summary": False,
            "logger": {
                "class_path": "pytorch_lightning.loggers.CSVLogger",
                "init_args": {"save_dir": str(tmp_path)},
            },
            "callbacks": [
                {
                    "class_path": "lostcities_cfr.callbacks.BestResponseProbe",
                    "init_args": {
                        "every_n_iterations": 1,
                        "iterations": 2,
                        "games_per_rollout": 16,
                        "games": 20,
                        "network": {"width": 16, "depth": 1},
                    },
                }
            ],
        },
        "model": tiny_cli_model(),
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    run("fit", ["--config", str(tmp_path / "run.yaml")])
    (log,) = tmp_path.glob("**/metrics.csv")
    with open(log, newline="") as file:
        (row,) = [r for r in csv.DictReader(file) if r["exploit/score_diff"]]
    assert float(row["iteration"]) == 1.0
    assert float(row["exploit/score_diff_ci_low"]) <= float(row["exploit/score_diff"])
