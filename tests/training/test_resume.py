"""Runs that cannot mislead (``lostcities_cfr.training.runs`` through ``fit``): a resume runs what its
command line says or stops naming the field; one folder holds one run and ``last.ckpt`` is
always its newest checkpoint; bad checkpoints and bad values stop before any work with one
line; a loss or a row that turns non-finite stops the run and keeps the last checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from lostcities_cfr.commands.fit import run
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.training import DeepCFR, runs


def fit(config: Path, *args: str):
    return run("fit", ["--config", str(config), *args])


def refused(capsys, config: Path, *args: str) -> str:
    """``fit`` with these arguments must exit with status 2; its stderr."""
    with pytest.raises(SystemExit) as exit_info:
        fit(config, *args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def last_checkpoint(run_dir: Path) -> dict:
    return torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)


def test_a_resume_honours_evaluation_and_learning_rate_overrides_and_records_them(
    write_config, tmp_path, capsys
):
    config = write_config(name="run", max_epochs=1, final_eval_games=10)
    fit(config)
    checkpoint = tmp_path / "run" / "checkpoints" / "last.ckpt"
    cli = fit(
        config,
        *("--ckpt_path", str(checkpoint), "--trainer.max_epochs", "2"),
        *("--model.eval_opponent", "discard-only", "--model.learning_rate", "0.01"),
    )
    assert "opponent: discard-only" in capsys.readouterr().out  # the final evaluation
    learning_rates = [g["lr"] for o in cli.trainer.optimizers for g in o.param_groups]
    assert learning_rates == [0.01] * 3  # not the restored optimizers' 0.001
    saved = yaml.safe_load((Path(cli.trainer.log_dir) / "config.yaml").read_text())
    assert saved["model"]["init_args"]["eval_opponent"] == "discard-only"
    assert saved["model"]["init_args"]["learning_rate"] == 0.01
    assert saved["ckpt_path"] == str(checkpoint)
    assert last_checkpoint(tmp_path / "run")["hyper_parameters"]["learning_rate"] == 0.01


def test_a_resume_that_changes_what_made_the_checkpoint_is_refused_naming_the_field(
    write_config, tmp_path, capsys
):
    config = write_config(name="run", max_epochs=1, final_eval_games=0)
    fit(config)
    for override, named in [
        (["--model.network.width", "64"], "model.network.width: checkpoint 32, command line 64"),
        (["--model.rules", "classic"], "model.rules: checkpoint 'tiny', command line 'classic'"),
        (["--model.sampler.init_args.walkers", "16"], "model.sampler.init_args.walkers"),
        (["--seed_everything", "8"], "model.seed: checkpoint 7, command line 8"),
        (["--model.advantage_buffer_size", "4096"], "model.advantage_buffer_size"),
    ]:
        err = refused(capsys, config, "--ckpt_path", "last", "--trainer.max_epochs", "2", *override)
        assert named in err, err
    assert last_checkpoint(tmp_path / "run")["epoch"] == 0  # nothing ran


def test_a_new_run_into_a_used_folder_is_refused_and_leaves_it_as_it_was(
    write_config, tmp_path, capsys
):
    config = write_config(name="run", max_epochs=1, final_eval_games=0)
    fit(config)
    checkpoints = tmp_path / "run" / "checkpoints"
    before = sorted(p.name for p in checkpoints.iterdir())
    err = refused(capsys, config, "--model.learning_rate", "0.01")
    assert f"trainer.default_root_dir={tmp_path / 'run'} already holds a run" in err
    assert "--ckpt_path last" in err
    assert sorted(p.name for p in checkpoints.iterdir()) == before


def test_a_moved_run_resumes_and_last_ckpt_is_its_newest_checkpoint(write_config, tmp_path):
    config = write_config(name="run", max_epochs=1, final_eval_games=0)
    fit(config)
    moved = tmp_path / "moved"
    (tmp_path / "run").rename(moved)
    fit(
        config,
        *("--ckpt_path", "last", "--trainer.max_epochs", "2"),
        *(
            "--trainer.default_root_dir",
            str(moved),
            "--trainer.logger.init_args.save_dir",
            str(moved),
        ),
    )
    names = [p.name for p in (moved / "checkpoints").iterdir()]
    assert "last.ckpt" in names and not [n for n in names if n.startswith("last-")]
    assert last_checkpoint(moved)["epoch"] == 1


def test_ckpt_path_last_without_a_checkpoint_stops_unless_asked_to_start_afresh(
    write_config, tmp_path, capsys
):
    config = write_config(name="run", max_epochs=1, final_eval_games=0)
    run_dir = tmp_path / "run"
    err = refused(capsys, config, "--ckpt_path", "last")
    assert f"ckpt_path=last: there is no {run_dir / 'checkpoints' / 'last.ckpt'}" in err
    assert not run_dir.exists()  # nothing ran
    cli = fit(config, "--ckpt_path", "last_if_present")
    assert cli.model.current_epoch == 1
    err = refused(capsys, config, "--ckpt_path", "last", "--trainer.max_epochs", "0")
    assert "trainer.max_epochs=0: " in err and "has already run 1 iterations" in err
    # A last.ckpt whose file is gone (a save killed between its steps) stops too.
    (run_dir / "checkpoints" / "last.ckpt").resolve().unlink()
    err = refused(capsys, config, "--ckpt_path", "last_if_present", "--trainer.max_epochs", "2")
    assert "last.ckpt links to epoch=0-step=" in err and "which is missing" in err
    err = refused(capsys, config, "--ckpt_path", str(tmp_path / "nowhere.ckpt"))
    assert "nowhere.ckpt': no such file" in err


def test_a_run_folder_that_cannot_be_written_stops_the_run_before_any_work(
    write_config, tmp_path, capsys
):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    config = write_config(name="run", max_epochs=1)
    run_dir = str(blocker / "run")
    err = refused(
        capsys,
        config,
        *("--trainer.default_root_dir", run_dir, "--trainer.logger.init_args.save_dir", run_dir),
    )
    assert f"the run folder {run_dir} cannot be written (Not a directory)" in err
    assert "vs random" not in capsys.readouterr().out  # no evaluation, no iteration ran


class OpenOnLoad:
    """Pickles as ``open(marker, "w")``: unpickling it unsafely creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_an_unsafe_or_unreadable_ckpt_path_stops_with_one_line_naming_the_file(
    write_config, tmp_path, capsys
):
    config = write_config(name="run", max_epochs=1)
    marker = tmp_path / "code-ran"
    bomb = tmp_path / "bomb.ckpt"
    torch.save({"state_dict": {}, "payload": OpenOnLoad(marker)}, bomb)
    truncated = tmp_path / "truncated.ckpt"
    torch.save({"state_dict": {"w": torch.zeros(1000)}}, truncated)
    truncated.write_bytes(truncated.read_bytes()[:2000])
    err = refused(capsys, config, "--ckpt_path", str(bomb))
    assert f"checkpoint {bomb}: refused" in err and "GLOBAL io.open" in err
    err = refused(capsys, config, "--ckpt_path", str(truncated))
    assert f"checkpoint {truncated}: not a readable checkpoint, truncated or corrupted" in err
    assert not marker.exists() and not (tmp_path / "run").exists()


def test_a_non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(
    write_config, tmp_path, capsys
):
    config = write_config(name="run", max_epochs=3, final_eval_games=0)
    err = refused(capsys, config, "--trainer.callbacks+=run_probes.PoisonStrategyNetwork")
    assert "loss/strategy=nan at iteration 2, update 1: training stopped" in err
    assert "(the last checkpoint, iteration 1's, is kept)" in err
    checkpoint = last_checkpoint(tmp_path / "run")
    assert checkpoint["epoch"] == 0  # iteration 1's
    assert all(torch.isfinite(w).all() for w in checkpoint["state_dict"].values())


def test_a_checkpoint_with_non_finite_rows_or_weights_is_refused_on_resume(
    write_config, tmp_path, capsys
):
    config = write_config(name="run", max_epochs=1, final_eval_games=0)
    fit(config)
    checkpoints = tmp_path / "run" / "checkpoints"
    rows = last_checkpoint(tmp_path / "run")
    rows["deep_cfr"]["strategy_buffer"]["targets"][0, 0] = float("inf")  # a flipped bit
    torch.save(rows, checkpoints / "rows.ckpt")
    weights = last_checkpoint(tmp_path / "run")
    weights["state_dict"]["strategy_net.hidden.0.0.weight"][0, 0] = float("nan")
    torch.save(weights, checkpoints / "weights.ckpt")
    resume = ["--trainer.max_epochs", "2", "--ckpt_path"]
    err = refused(capsys, config, *resume, str(checkpoints / "rows.ckpt"))
    assert "rows.ckpt: buffer strategy: ReservoirBuffer state: targets hold NaN or inf" in err
    err = refused(capsys, config, *resume, str(checkpoints / "weights.ckpt"))
    assert "weights.ckpt: weight strategy_net.hidden.0.0.weight holds NaN or infinite" in err


def test_a_run_moved_with_its_root_dir_moves_its_logs_too(write_config, tmp_path):
    # The logger names no save_dir: it logs in the run's folder, wherever that is.
    config = write_config(name="run", max_epochs=1, final_eval_games=0)
    fit(config)
    fit(config, "--trainer.default_root_dir", str(tmp_path / "moved"))
    for folder in ("run", "moved"):
        assert len(list((tmp_path / folder).rglob("metrics.csv"))) == 1
        assert len(list((tmp_path / folder).rglob("config.yaml"))) == 1


def test_a_new_run_whose_loggers_log_into_another_run_is_refused(write_config, tmp_path, capsys):
    # A run moved with --trainer.default_root_dir alone, its logger naming the first run's
    # folder: it would replace config.yaml there and mix the logs.
    config = write_config(name="run", max_epochs=1, final_eval_games=0)
    named = yaml.safe_load(config.read_text())
    named["trainer"]["logger"]["init_args"]["save_dir"] = str(tmp_path / "run")
    config.write_text(yaml.safe_dump(named))
    fit(config)
    (saved,) = (tmp_path / "run").rglob("config.yaml")
    before = saved.read_text()
    err = refused(capsys, config, "--trainer.default_root_dir", str(tmp_path / "other"))
    assert f"folder {tmp_path / 'run'} holds another run ({saved})" in err, err
    assert "save_dir" in err
    assert saved.read_text() == before and len(list((tmp_path / "run").rglob("config.yaml"))) == 1
    assert not (tmp_path / "other").exists()


def test_a_checkpoint_written_before_engine_kernels_existed_resumes_on_either_kernels():
    # Compiled and eager kernels give the same rows (tests/game/test_fused.py): a resume may
    # switch, and a checkpoint that never named them is no other run.
    saved = {"learning_rate": 0.001, "network": {"width": 32}}
    for kernels in ("eager", "compiled"):
        runs.check_resumable(saved, {**saved, "engine_kernels": kernels}, Path("old.ckpt"))


def test_an_argument_added_after_a_checkpoint_counts_at_its_default():
    # tests/training/test_old_checkpoints.py resumes a real old checkpoint this way.
    saved = {"learning_rate": 0.001, "predictive": True}
    filled = runs.with_added_defaults(saved, DeepCFR)
    assert filled["predictive"] is True  # saved values stand
    assert filled["regret_targets"] == "sampled" and filled["discount_alpha"] is None
    wanted = {**filled, "regret_targets": "cumulative"}
    with pytest.raises(ConfigError, match=r"model\.regret_targets: checkpoint 'sampled'"):
        runs.check_resumable(filled, wanted, Path("old.ckpt"))
