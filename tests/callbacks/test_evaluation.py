import pytest
import torch
from tiny_runs import fit, read_csv_metrics, tiny_model

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.callbacks import PeriodicEvaluation
from lostcities_cfr.callbacks.evaluation import TABLE_COLUMNS
from lostcities_cfr.errors import AgentSpecError, ConfigError
from lostcities_cfr.evaluation.arena import evaluate
from lostcities_cfr.training.metrics import eval_prefix

# Greedy policies against deterministic opponents: the results depend on the weights and the
# deals alone, so a direct evaluation of the final model must reproduce the last ones.
OPPONENTS = ["heuristic", "heuristic:aggressive"]


@pytest.fixture(scope="module")
def evaluated_run(tmp_path_factory):
    evaluation = PeriodicEvaluation(
        every_n_iterations=2, games=20, opponents=OPPONENTS, greedy=True, seed=5
    )
    torch.manual_seed(0)  # the networks' initialisation, whatever ran before
    trainer, model = fit(tmp_path_factory.mktemp("eval"), [evaluation], max_epochs=3)
    return evaluation, model, read_csv_metrics(trainer)


def test_evaluates_every_n_iterations_and_at_the_last(evaluated_run):
    _, _, rows = evaluated_run
    evaluated = [row["iteration"] for row in rows if "eval/seconds" in row]
    assert evaluated == [2.0, 3.0]


def test_logged_figures_equal_a_direct_evaluation_on_the_same_deals(evaluated_run):
    evaluation, model, rows = evaluated_run
    row = next(r for r in rows if r["iteration"] == 3.0)  # the final model's evaluation
    table = {(r[0], r[1], r[2]): r for r in evaluation.rows}
    for policy in ("average", "current"):
        for spec in OPPONENTS:
            result = evaluate(
                model.agent(policy, greedy=True),
                agent_from_spec(spec),
                20,
                rules=model.rules,
                seed=5,
            )
            rounds, prefix = result.rounds, eval_prefix(f"{policy}:greedy", spec)
            expected = {
                "win_rate": rounds.win_rate,
                "win_rate_ci_low": rounds.win_rate_ci[0],
                "win_rate_ci_high": rounds.win_rate_ci[1],
                "score_diff": rounds.score_diff,
                "score_diff_ci_low": rounds.score_diff_ci[0],
                "score_diff_ci_high": rounds.score_diff_ci[1],
            }
            for suffix, value in expected.items():
                assert row[prefix + suffix] == pytest.approx(value, rel=1e-6), prefix + suffix
            logged = dict(zip(TABLE_COLUMNS, table[(3, f"{policy}:greedy", spec)], strict=True))
            assert logged["games"] == 20 and logged["draw_rate"] == rounds.draw_rate
            for suffix, value in expected.items():
                assert logged[suffix] == pytest.approx(value), suffix
    # Different policies and opponents do give different figures here.
    assert (
        len(
            {
                row[eval_prefix(f"{p}:greedy", o) + "score_diff"]
                for p in ("average", "current")
                for o in OPPONENTS
            }
        )
        > 1
    )


def test_amortized_cost_is_all_evaluation_time_over_iterations(evaluated_run):
    evaluation, _, rows = evaluated_run
    at_2, at_3 = (r for r in rows if "eval/seconds" in r)
    assert at_2["eval/amortized_s"] == pytest.approx(at_2["eval/seconds"] / 2, rel=1e-5)
    total = at_2["eval/seconds"] + at_3["eval/seconds"]
    assert at_3["eval/amortized_s"] == pytest.approx(total / 3, rel=1e-5)
    assert evaluation.total_seconds == pytest.approx(total, rel=1e-5)


def test_table_holds_one_row_per_iteration_policy_and_opponent(evaluated_run):
    evaluation, _, _ = evaluated_run
    assert len(evaluation.rows) == 2 * 2 * 2
    assert all(len(row) == len(TABLE_COLUMNS) for row in evaluation.rows)
    assert {(r[0], r[1], r[2]) for r in evaluation.rows} == {
        (i, p, o) for i in (2, 3) for p in ("average:greedy", "current:greedy") for o in OPPONENTS
    }


def test_state_survives_a_checkpoint(evaluated_run):
    evaluation, _, _ = evaluated_run
    restored = PeriodicEvaluation()
    restored.load_state_dict(evaluation.state_dict())
    assert restored.total_seconds == evaluation.total_seconds
    assert restored.rows == evaluation.rows


def test_the_same_model_gets_the_same_results_every_time():
    model = tiny_model()
    evaluation = PeriodicEvaluation(games=16, opponents=["random"])
    first = evaluation.evaluate_policies(model, 1)
    assert evaluation.evaluate_policies(model, 1) == first


def test_opponent_paths_keep_the_metric_tree_three_levels_deep():
    assert eval_prefix("average", "ckpt:runs/a.ckpt") == "eval/average/ckpt:runs_a.ckpt/"


@pytest.mark.parametrize(
    "arguments",
    [
        {"every_n_iterations": 0},
        {"games": 0},
        {"opponents": []},
        {"policies": []},
    ],
)
def test_unworkable_settings_are_refused(arguments):
    with pytest.raises(ConfigError):
        PeriodicEvaluation(**arguments)


def test_a_policy_the_model_does_not_play_is_refused_at_setup():
    evaluation = PeriodicEvaluation(policies=["average", "best"])
    with pytest.raises(ConfigError, match="best"):
        evaluation.setup(None, tiny_model(), "fit")


def test_a_bad_opponent_spec_fails_before_training(tmp_path):
    with pytest.raises(AgentSpecError):
        fit(tmp_path, [PeriodicEvaluation(opponents=["nobody"])], max_epochs=1)
