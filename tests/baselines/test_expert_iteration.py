"""Expert iteration: the soft and deviation targets and their loss, batched labelling equal to labelling one
game at a time, a tiny run through ``fit`` whose policy moves toward the search's targets, a
resume that continues as if never stopped, and the bad inputs refused in one line."""

from __future__ import annotations

import math
from pathlib import Path

import baseline_runs
import pytest
import torch
from baseline_runs import write_run_config

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.baselines import PPO, ExpertIteration
from lostcities_cfr.baselines.expert_iteration_arguments import load_base
from lostcities_cfr.baselines.expert_labels import (
    Labels,
    deviation_targets,
    label_games,
    label_one_at_a_time,
    mixed_targets,
    soft_cross_entropy,
    soft_targets,
)
from lostcities_cfr.cfr import NetworkConfig
from lostcities_cfr.commands import main
from lostcities_cfr.commands.fit import run
from lostcities_cfr.evaluation.arena import evaluate
from lostcities_cfr.game import GameBatch, Rules
from lostcities_cfr.game.poker import KuhnPoker
from lostcities_cfr.training import metrics
from lostcities_cfr.training.checkpoint import (
    MODEL_CLASS_KEY,
    class_path,
    load_model,
    plain_data,
)

TINY_SEARCH = {"games_per_round": 8, "worlds": 2, "top": None, "updates_per_round": 20}


def save_base(model: PPO, path: Path) -> Path:
    """A networks-only file of an untrained PPO model, as ``ckpt:PATH`` loads it."""
    torch.save(
        {
            MODEL_CLASS_KEY: class_path(PPO),
            "hyper_parameters": plain_data(dict(model.hparams)),
            "state_dict": model.state_dict(),
            "iteration": 0,
        },
        path,
    )
    return path


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory) -> str:
    """``ckpt:PATH`` of a PPO policy on tiny rules (16x1 MLPs, seeded weights)."""
    torch.manual_seed(0)
    model = PPO(rules="tiny", network=NetworkConfig(width=16, depth=1))
    return f"ckpt:{save_base(model, tmp_path_factory.mktemp('base') / 'tiny.pt')}"


def write_config(run_dir: Path, start: str, max_epochs: int = 2, **model: object) -> Path:
    """A tiny run from the base ``start`` (``model`` overrides any setting, the base too)."""
    model_class = "lostcities_cfr.baselines.ExpertIteration"
    init_args = {"base": start, **TINY_SEARCH, **model}
    return write_run_config(run_dir, model_class, init_args, max_epochs)


def logged_rows(run_dir: Path) -> list[dict[str, str]]:
    return baseline_runs.logged_rows(run_dir, "loss/expert")


def in_game_order(labels: Labels) -> dict[str, torch.Tensor]:
    """Every field of ``labels`` sorted by (game, step), NaN made comparable."""
    order = (labels.game * 10_000 + labels.step).argsort()
    fields = {name: getattr(labels, name)[order] for name in Labels.__dataclass_fields__}
    return {k: v.nan_to_num(-1e9) if v.is_floating_point() else v for k, v in fields.items()}


# ---- soft targets -----------------------------------------------------------------------------
def test_soft_targets_are_a_softmax_of_the_valued_actions_over_the_temperature():
    nan = math.nan
    values = torch.tensor([[4.0, nan, 2.0, 0.0], [nan, 5.0, nan, nan]])
    targets = soft_targets(values, temperature=2.0)
    expected = torch.softmax(torch.tensor([2.0, 1.0, 0.0]), 0)
    assert torch.allclose(targets[0, [0, 2, 3]], expected)
    assert targets[0, 1] == 0 and targets[1].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert torch.allclose(targets.sum(1), torch.ones(2))


def test_a_cold_target_is_the_best_mean_and_a_hot_one_spreads_over_the_valued_actions():
    values = torch.tensor([[3.0, 1.0, math.nan, 2.5]])
    assert soft_targets(values, 1e-3).tolist() == [[1.0, 0.0, 0.0, 0.0]]
    hot = soft_targets(values, 1e6)
    assert torch.allclose(hot, torch.tensor([[1 / 3, 1 / 3, 0.0, 1 / 3]]))


def test_played_weight_moves_the_target_toward_the_searchs_move():
    values = torch.tensor([[3.0, 1.0, math.nan, 2.5]])
    played = torch.tensor([1])
    soft = soft_targets(values, 2.0)
    assert torch.equal(mixed_targets(values, played, 2.0, 0.0), soft)
    assert mixed_targets(values, played, 2.0, 1.0).tolist() == [[0.0, 1.0, 0.0, 0.0]]
    half = mixed_targets(values, played, 2.0, 0.5)
    assert torch.allclose(half, 0.5 * soft + torch.tensor([[0.0, 0.5, 0.0, 0.0]]))


def test_deviation_targets_keep_the_networks_probabilities_where_the_search_did_not_deviate():
    prior = torch.tensor([[0.7, 0.2, 0.0, 0.1], [0.7, 0.2, 0.0, 0.1]])
    played = torch.tensor([0, 3])
    deviated = torch.tensor([False, True])
    whole = deviation_targets(prior, played, deviated, played_weight=1.0)
    assert torch.equal(whole[0], prior[0]) and whole[1].tolist() == [0.0, 0.0, 0.0, 1.0]
    half = deviation_targets(prior, played, deviated, played_weight=0.5)
    assert torch.equal(half[0], prior[0])
    assert torch.allclose(half[1], torch.tensor([0.35, 0.1, 0.0, 0.55]))
    assert torch.allclose(half.sum(1), torch.ones(2))
    # at the network's own probabilities the cross-entropy is least: no gradient
    logits = prior[:1].log().requires_grad_()
    soft_cross_entropy(logits, prior[:1] > 0, whole[:1]).backward()
    assert logits.grad.abs().max() < 1e-6


def test_anchor_rows_are_the_decisions_the_search_left_with_the_networks_probabilities(
    tiny_base,
):
    model = ExpertIteration(
        base=tiny_base, worlds=2, top=None, max_deck=1, target="deviations", anchor=True
    )
    batch = GameBatch.new(model.rules, 8, seed=2)
    with torch.no_grad():
        labels, _ = label_games(model.search, batch, seed=3, anchor=True)
        probs = torch.softmax(model.policy_net(labels.features).masked_fill(~labels.legal, -1e9), 1)
    anchors = ~labels.searched
    assert anchors.any() and labels.searched.any()
    assert labels.values[anchors].isnan().all() and not labels.deviated[anchors].any()
    assert (labels.legal.sum(1) > 1).all()
    assert torch.allclose(labels.prior, probs, atol=1e-6)
    model.setup("fit")
    model.add_rows(labels)
    A = model.game.n_actions
    targets = model.buffer.targets[: len(labels), :A].float()
    assert torch.allclose(targets[anchors], labels.prior[anchors], atol=1e-3)
    assert torch.allclose(targets.sum(1), torch.ones(len(labels)), atol=1e-2)


def test_a_deep_cfr_base_gives_its_average_strategy_and_a_fresh_value_network():
    base = Path(__file__).parents[1] / "data" / "tiny_run_before_layout_move.ckpt"
    model = ExpertIteration(base=f"ckpt:{base}", worlds=2, top=None)
    assert model.rules == Rules.tiny() and type(model.value_net).__name__ == "ColorNet"
    with torch.no_grad():
        labels, _ = label_games(model.search, GameBatch.new(model.rules, 4, seed=1), seed=0)
    assert len(labels) > 0


def test_a_deep_cfr_base_trains_through_fit(tmp_path):
    # LightningCLI hands the model's arguments to every save_hyperparameters called while it
    # builds the model: the base's DeepCFR once took ExpertIteration's as its own and failed
    base = Path(__file__).parents[1] / "data" / "tiny_run_before_layout_move.ckpt"
    model = run("fit", ["--config", str(write_config(tmp_path / "cfr", f"ckpt:{base}", 1))]).model
    assert model.current_epoch == 1 and len(model.buffer) > 0


def test_max_turns_caps_the_rounds_below_the_bases_own_cap(tiny_base):
    assert ExpertIteration(base="best").rules.max_turns == 300
    assert ExpertIteration(base="best", max_turns=None).rules == Rules.classic()
    assert ExpertIteration(base=tiny_base).rules == Rules.tiny()  # its own cap, 8, is lower


def test_the_cross_entropy_is_least_at_the_targets_where_it_is_their_entropy():
    legal = torch.tensor([[True, True, False, True]])
    targets = torch.tensor([[0.5, 0.25, 0.0, 0.25]])
    at_targets = torch.tensor([[math.log(0.5), math.log(0.25), 123.0, math.log(0.25)]])
    entropy = -(targets[targets > 0] * targets[targets > 0].log()).sum()
    loss = soft_cross_entropy(at_targets, legal, targets)
    assert torch.isclose(loss, entropy)  # the illegal logit changes nothing
    for shift in (torch.tensor([[1.0, 0.0, 0.0, 0.0]]), torch.tensor([[0.0, 0.0, 0.0, -1.0]])):
        assert soft_cross_entropy(at_targets + shift, legal, targets) > loss


# ---- labelling ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("base", "settings", "games"),
    [
        ("tiny", {"worlds": 3, "top": None}, 12),
        ("tiny", {"worlds": 2, "top": 2, "label": "all"}, 12),
        ("tiny", {"worlds": 2, "top": 2, "max_deck": 1, "anchor": True}, 12),
        ("best", {"worlds": 2, "top": 3, "max_deck": 4}, 3),
    ],
    ids=["tiny-every-action", "tiny-top-2", "tiny-anchor", "classic-late"],
)
def test_batched_labelling_equals_labelling_one_game_at_a_time(tiny_base, base, settings, games):
    model = ExpertIteration(base=tiny_base if base == "tiny" else base, **settings)
    batch = GameBatch.new(model.rules, games, seed=17)
    with torch.no_grad():
        anchor = model.hparams.anchor
        batched, decisions = label_games(model.search, batch.clone(), seed=5, anchor=anchor)
        alone, decisions_alone = label_one_at_a_time(model.search, batch.clone(), 5, anchor)
    assert len(batched) > games and decisions == decisions_alone
    one, other = in_game_order(batched), in_game_order(alone)
    # the network's probabilities come from a forward pass over the batch, whose float sums
    # depend on its size: equal to rounding
    assert torch.allclose(one.pop("prior"), other.pop("prior"), atol=1e-6)
    assert {name: torch.equal(one[name], other[name]) for name in one} == dict.fromkeys(one, True)


def test_labels_value_several_legal_actions_and_carry_the_movers_outcome(tiny_base):
    model = ExpertIteration(base=tiny_base, worlds=2, top=None)
    batch = GameBatch.new(model.rules, 16, seed=4)
    with torch.no_grad():
        labels, _ = label_games(model.search, batch, seed=1)
    valued = ~labels.values.isnan()
    assert not (valued & ~labels.legal).any() and (valued.sum(1) >= 2).all()
    assert torch.equal(valued, labels.legal)  # top=None values every legal action
    # both seats of a game see opposite outcomes
    for g in labels.game.unique():
        mine = labels.game == g
        by_seat = {int(s): float(labels.returns[mine & (labels.seat == s)][0]) for s in (0, 1)}
        assert by_seat[0] == -by_seat[1]


# ---- a run through fit -------------------------------------------------------------------------
def test_a_tiny_run_through_fit_moves_the_policy_toward_the_search_targets(
    tmp_path, tiny_base, capsys
):
    run_dir = tmp_path / "exit"
    cli = run("fit", ["--config", str(write_config(run_dir, tiny_base))])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("iter")]
    assert len(lines) == 2 and "expert" in lines[0] and "rollout" in lines[0]
    rows = logged_rows(run_dir)
    assert [float(row["iteration"]) for row in rows] == [1.0, 2.0]
    columns = {name for row in rows for name, value in row.items() if value}
    assert {"loss/expert", "loss/value", "expert/labels_per_s", "buffer/expert_fill"} <= columns
    assert sorted(name for name in columns if not metrics.documented(name)) == []

    # on every row the reservoir holds, the trained policy is nearer the targets than the base
    model = cli.model
    buffer = model.buffer
    A = model.game.n_actions
    features, legal = buffer.features[: len(buffer)].float(), buffer.legal[: len(buffer), :A]
    targets = buffer.targets[: len(buffer), :A].float()
    start = load_base(tiny_base, seed=0).policy_net
    with torch.no_grad():
        before = soft_cross_entropy(start(features), legal, targets)
        after = soft_cross_entropy(model.policy_net(features), legal, targets)
    assert after < before - 0.05

    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    assert isinstance(load_model(checkpoint), ExpertIteration)
    agent = agent_from_spec(f"ckpt:{checkpoint}:greedy", seed=0)
    assert evaluate(agent, agent_from_spec("random", seed=1), 4, rules=Rules.tiny()).games == 4
    final = torch.load(run_dir / "checkpoints" / "final.ckpt", weights_only=True)
    assert ExpertIteration.training_state_key not in final  # the networks, not the reservoir


def test_ppo_between_rounds_adds_its_loss_and_logs_its_self_play(tmp_path, tiny_base):
    run_dir = tmp_path / "ppo"
    model = run("fit", ["--config", str(write_config(run_dir, tiny_base, ppo_games=4))]).model
    rows = logged_rows(run_dir)
    ppo_columns = {"loss/policy", "loss/entropy", "ppo/approx_kl", "ppo/games", "ppo/decisions"}
    assert all(math.isfinite(float(row[name])) for row in rows for name in ppo_columns)
    assert [float(row["ppo/games"]) for row in rows] == [4.0, 4.0]
    assert all(float(row["ppo/approx_kl"]) > 0 for row in rows)  # the policy moved
    assert sorted(name for row in rows for name in row if not metrics.documented(name)) == []
    # without PPO the first round labels the same decisions (the self-play draws its seeds
    # after the labels'), and the updates end elsewhere
    plain = run("fit", ["--config", str(write_config(tmp_path / "plain", tiny_base))]).model
    assert logged_rows(tmp_path / "plain")[0]["expert/labels"] == rows[0]["expert/labels"]
    weights = zip(model.policy_net.parameters(), plain.policy_net.parameters(), strict=True)
    assert not all(torch.equal(mine, theirs) for mine, theirs in weights)


@pytest.mark.parametrize("ppo_games", [0, 4])
def test_a_resumed_run_continues_as_if_never_stopped(tmp_path, tiny_base, ppo_games):
    whole_config = write_config(tmp_path / "whole", tiny_base, 3, ppo_games=ppo_games)
    whole = run("fit", ["--config", str(whole_config)]).model
    config = str(write_config(tmp_path / "cut", tiny_base, 2, ppo_games=ppo_games))
    run("fit", ["--config", config])
    resumed = run(
        "fit", ["--config", config, "--trainer.max_epochs", "3", "--ckpt_path", "last"]
    ).model
    assert resumed.current_epoch == 3 and resumed.buffer.n_seen == whole.buffer.n_seen
    assert torch.equal(resumed.buffer.targets, whole.buffer.targets)
    for name, weight in whole.state_dict().items():
        assert torch.equal(resumed.state_dict()[name], weight), name


# ---- bad input ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def poker_base(tmp_path_factory) -> str:
    """``ckpt:PATH`` of a PPO policy of Kuhn poker: another game than the search's."""
    model = PPO(rules=KuhnPoker(), network=NetworkConfig(width=16, depth=1))
    return f"ckpt:{save_base(model, tmp_path_factory.mktemp('poker') / 'kuhn.pt')}"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"base": "heuristic:balanced"}, "base='heuristic:balanced': a HeuristicAgent offers no"),
        ({"base": "search:best"}, "base='search:best': a SearchAgent offers no network policy"),
        ({"base": "poker"}, "kuhn.pt plays kuhn_poker"),
        ({"base": "ckpt:nowhere.ckpt"}, "base='ckpt:nowhere.ckpt'"),
        ({"top": 1}, "ExpertIteration top=1 must be >= 2"),
        ({"ppo_games": 1}, "ExpertIteration ppo_games=1; expected 0 (no PPO) or at least 2"),
        ({"temperature": 0}, "model.temperature=0: Not of type PositiveFloat"),
        ({"label": "early"}, "model.label=early: Expected a typing.Literal['late', 'all']."),
        ({"target": "best"}, "model.target=best: Expected a typing.Literal['soft', 'deviations"),
    ],
)
def test_a_bad_setting_exits_2_with_one_line_naming_it_before_any_game(
    tmp_path, capsys, tiny_base, poker_base, settings, message
):
    if settings.get("base") == "poker":
        settings = {"base": poker_base}
    config = write_config(tmp_path / "bad", tiny_base, **settings)
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(config)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1, error
    assert not (tmp_path / "bad" / "checkpoints").exists()


@pytest.mark.parametrize(
    ("override", "field"),
    [
        (["--model.init_args.worlds", "3"], "model.worlds: checkpoint 2, command line 3"),
        (["--model.init_args.label", "all"], "model.label: checkpoint 'late'"),
        (["--model.init_args.temperature", "5"], "model.temperature: checkpoint 2.0"),
        (["--model.init_args.target", "deviations"], "model.target: checkpoint 'soft'"),
    ],
)
def test_a_resume_that_changes_the_search_is_refused_and_loses_nothing(
    tmp_path, capsys, tiny_base, override, field
):
    config = str(write_config(tmp_path / "run", tiny_base, 1))
    main(["fit", "--config", config])
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    saved = last.read_bytes()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        argv = ["--config", config, "--trainer.max_epochs", "2", "--ckpt_path", "last"]
        main(["fit", *argv, *override])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert field in error and len(error.splitlines()) == 1, error
    assert last.read_bytes() == saved
