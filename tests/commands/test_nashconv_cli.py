"""``python -m lostcities_cfr nashconv`` end to end: figures equal to OpenSpiel's own code on
the exported policy, every policy of a checkpoint, and one-line refusals that write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lostcities_cfr.commands import main
from lostcities_cfr.commands.fit import run

pyspiel = pytest.importorskip("pyspiel")
from open_spiel.python import policy as openspiel_policy  # noqa: E402
from open_spiel.python.algorithms import exploitability  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.fixture(scope="module")
def kuhn_checkpoint(tmp_path_factory) -> Path:
    """A Kuhn poker checkpoint of ``configs/kuhn_deep_cfr.yaml`` (4 iterations), with its
    iterations stored for the sdcfr policy."""
    folder = tmp_path_factory.mktemp("kuhn")
    run(
        "fit",
        [
            *("--config", str(CONFIGS / "kuhn_deep_cfr.yaml"), "--trainer.max_epochs", "4"),
            *("--trainer.default_root_dir", str(folder), "--trainer.logger", "false"),
            *("--model.snapshots", "true"),
        ],
    )
    return folder / "checkpoints" / "final.ckpt"


def nashconv(capsys, *args: str) -> dict:
    main(["nashconv", *args, "--json"])
    return json.loads(capsys.readouterr().out)


def refused(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(["nashconv", *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    return err.splitlines()[-1]  # after argparse's usage lines, where it prints them


@pytest.mark.parametrize(
    ("game", "uniform", "sets"), [("kuhn_poker", 11 / 12, 12), ("leduc_poker", 4.747222222, 936)]
)
def test_uniform_play_is_measured_exactly(capsys, game, uniform, sets):
    result = nashconv(capsys, "--agent", "uniform", "--game", game)
    assert result["nash_conv"] == pytest.approx(uniform, abs=1e-8)
    assert result["exploitability"] == pytest.approx(uniform / 2, abs=1e-8)
    assert result["information_sets"] == sets and result["game"] == game


def test_the_exported_policy_gives_openspiel_the_same_figure(capsys, kuhn_checkpoint, tmp_path):
    exported = tmp_path / "policy.json"
    result = nashconv(
        capsys, "--agent", f"ckpt:{kuhn_checkpoint}", "--export-policy", str(exported)
    )
    assert result["game"] == "kuhn_poker"  # the checkpoint knows its game
    assert result["exported_states"] == 12
    game = pyspiel.load_game("kuhn_poker")
    table = openspiel_policy.TabularPolicy(game)
    for key, probs in json.loads(exported.read_text()).items():
        table.action_probability_array[table.state_lookup[key]] = probs
    assert exploitability.nash_conv(game, table) == pytest.approx(result["nash_conv"], abs=1e-9)
    assert 0 < result["nash_conv"] < result["uniform_nash_conv"]


def test_every_policy_of_a_checkpoint_has_its_own_figure(capsys, kuhn_checkpoint):
    spec = f"ckpt:{kuhn_checkpoint}"
    figures = {
        policy: nashconv(capsys, "--agent", spec + policy)["nash_conv"]
        for policy in ("", ":average", ":current", ":sdcfr", ":greedy", ":current:greedy")
    }
    assert figures[""] == figures[":average"]  # deploy: average
    mixed = [figures[p] for p in (":average", ":current", ":sdcfr")]
    assert len({round(v, 9) for v in mixed}) == 3, figures
    assert all(np.isfinite(v) and v >= 0 for v in figures.values())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent", "uniform", "--game", "nope"], "unknown OpenSpiel game 'nope'"),
        (["--agent", "uniform", "--game", "classic"], "Lost Cities (classic rules) has more than max_nodes"),
        (["--agent", "uniform"], "--agent uniform needs --game"),
        (["--agent", "heuristic:cautious", "--game", "tiny"], "expected uniform | ckpt:PATH"),
        (["--agent", "ckpt:nowhere.ckpt"], "no checkpoint file at 'nowhere.ckpt'"),
        (["--agent", "uniform", "--game", "tic_tac_toe"], "provides no information_state_tensor"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_in_one_line(capsys, args, message):
    assert message in refused(capsys, *args)


def test_a_checkpoint_of_another_game_is_refused(capsys, kuhn_checkpoint):
    err = refused(capsys, "--agent", f"ckpt:{kuhn_checkpoint}", "--game", "leduc_poker")
    assert "plays kuhn_poker, not leduc_poker" in err


def test_an_export_that_cannot_be_made_writes_nothing(capsys, tmp_path):
    target = tmp_path / "policy.json"
    err = refused(capsys, "--agent", "uniform", "--game", "tiny", "--export-policy", str(target))
    assert "lost_cities_tiny is not an OpenSpiel game" in err
    assert not target.exists()
