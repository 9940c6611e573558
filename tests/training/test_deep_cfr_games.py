"""DeepCFR on the standard games through the protocol: a shipped poker config trains, its
checkpoint knows its game, the exact NashConv falls, and Lost Cities' parts refuse poker."""

from __future__ import annotations

from pathlib import Path

import pytest

from lostcities_cfr.cfr.budgeted_sampling import BudgetedSampling
from lostcities_cfr.cfr.escher import ESCHERSampling
from lostcities_cfr.cfr.exploitability import nash_conv
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.cfr.regret_matching import uniform_strategy
from lostcities_cfr.commands.fit import run
from lostcities_cfr.errors import ConfigError
from lostcities_cfr.game.poker import KuhnPoker, LeducPoker
from lostcities_cfr.training import DeepCFR, load_model

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def kuhn_fit(tmp_path: Path, *args: str):
    """``configs/kuhn_deep_cfr.yaml`` as shipped but short, without loggers, in ``tmp_path``."""
    return run(
        "fit",
        [
            *("--config", str(CONFIGS / "kuhn_deep_cfr.yaml")),
            *("--trainer.default_root_dir", str(tmp_path), "--trainer.logger", "false"),
            *args,
        ],
    )


def test_the_kuhn_config_learns_and_its_checkpoint_knows_its_game(tmp_path):
    cli = kuhn_fit(tmp_path, "--trainer.max_epochs", "5")  # NashConv logged at the 5th
    logged = cli.trainer.callback_metrics
    uniform = nash_conv(KuhnPoker(), uniform_strategy)
    assert float(logged["nash_conv"]) < 0.6 * uniform  # 0.92 for uniform play
    assert float(logged["exploitability"]) == pytest.approx(float(logged["nash_conv"]) / 2)
    model = load_model(tmp_path / "checkpoints" / "final.ckpt")
    assert model.game == KuhnPoker() and model.rules is None
    assert nash_conv(KuhnPoker(), model.average_policy) == pytest.approx(
        float(logged["nash_conv"]), abs=1e-5
    )


def test_cumulative_regret_targets_learn_from_one_iteration_of_rows(tmp_path):
    cli = kuhn_fit(
        tmp_path,
        *("--trainer.max_epochs", "5", "--model.regret_targets", "cumulative"),
        *("--model.discount_alpha", "1.5", "--model.holdout", "0.1"),
    )
    # 0.17 (sampled targets: 0.24; uniform play 0.92)
    assert float(cli.trainer.callback_metrics["nash_conv"]) < 0.3
    for buffer in cli.model.advantage_buffers:  # cleared before each traversal
        for held in (buffer, buffer.held_out):
            assert len(held) > 0 and held.iteration[: len(held)].eq(5).all()


def test_predictive_weights_change_the_fit_from_the_second_iteration_on(tmp_path):
    def advantage_loss(iterations: int, *args: str) -> float:
        cli = kuhn_fit(
            tmp_path / f"{iterations}{args}", "--trainer.max_epochs", str(iterations), *args
        )
        return float(cli.trainer.callback_metrics["loss/advantage_p0"])

    # The first iteration's rows are all the newest: weighing them twice changes nothing.
    assert advantage_loss(1, "--model.predictive", "true") == advantage_loss(1)
    assert advantage_loss(2, "--model.predictive", "true") != advantage_loss(2)


@pytest.mark.parametrize(
    "sampler", ["external_sampling.ExternalSampling", "outcome_sampling.OutcomeSampling",
                "escher.ESCHERSampling", "baseline_outcome_sampling.BaselineOutcomeSampling"],
)  # fmt: skip
def test_every_protocol_sampler_trains_on_leduc(tmp_path, sampler):
    # ESCHER's and the baseline's guide is a Lost Cities agent: none on poker
    guided = "ESCHER" in sampler or "Baseline" in sampler
    args = "{guide: null, guide_weight: 0}" if guided else "{}"
    cli = kuhn_fit(
        tmp_path,
        *("--model.rules", "lostcities_cfr.game.poker.LeducPoker", "--trainer.max_epochs", "2"),
        *("--model.sampler", f"{{class_path: lostcities_cfr.cfr.{sampler}, init_args: {args}}}"),
        *("--model.traversals_per_player", "64", "--model.advantage_updates", "5"),
        *("--model.strategy_updates", "5", "--model.value_updates", "5"),
        *("--model.exploitability_every", "1"),
    )
    logged = cli.trainer.callback_metrics
    assert float(logged["traversal/advantage_rows"]) > 0
    assert 0 < float(logged["nash_conv"]) < 20


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"final_eval_games": 10}, "final_eval_games=10: the final duplicate games are Lost Cities only; the game here is leduc_poker"),
        ({"color_augmentation": True}, "color_augmentation=True relabels Lost Cities' colours; the game here is leduc_poker"),
        ({"sampler": BudgetedSampling()}, "BudgetedSampling is for Lost Cities only; the game here is leduc_poker"),
        ({"sampler": ESCHERSampling()}, "ESCHERSampling guide='heuristic:balanced' is a Lost Cities agent; the game here is leduc_poker (set guide: null)"),
        ({"discount_alpha": 2.0}, "DeepCFR discount_alpha=2.0 discounts cumulative regrets; it needs regret_targets='cumulative'"),
        ({"network": NetworkConfig(architecture="colors")}, "colour networks (architecture='colors', hidden_features) are for Lost Cities only; the game here is leduc_poker"),
    ],
)  # fmt: skip
def test_lost_cities_parts_refuse_poker_in_one_line(arguments, message):
    options = {"final_eval_games": 0, **arguments}
    with pytest.raises(ConfigError) as error:
        DeepCFR(rules=LeducPoker(), **options)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_config_picks_the_game_by_class_path_and_a_bad_one_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        kuhn_fit(tmp_path, "--model.rules", "lostcities_cfr.game.poker.NoPoker")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "DeepCFR rules: 'lostcities_cfr.game.poker.NoPoker' names no Game class" in err
    assert "Traceback" not in err
    assert not (tmp_path / "checkpoints").exists()
