"""Every metric name comes from ``training/metrics.py``, and the docs' table is its table."""

from pathlib import Path

from tiny_runs import fit, read_csv_metrics, tiny_model

from lostcities_cfr.callbacks import CompileToggle, PeriodicEvaluation, PhaseTimer
from lostcities_cfr.training import metrics

DOCS = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def test_the_architecture_docs_show_the_registry_table():
    text = DOCS.read_text()
    assert metrics.markdown_table() in text, (
        "docs/architecture.md, 'Logged metrics', must be `python -m "
        "lostcities_cfr.training.metrics`'s table"
    )


def test_every_column_a_run_logs_is_documented(tmp_path):
    callbacks = [
        PeriodicEvaluation(every_n_iterations=1, games=4, opponents=["random", "heuristic"]),
        PhaseTimer(),
        CompileToggle(inference=False, training=False),
    ]
    model = tiny_model(final_eval_games=4, exploitability_every=1)
    trainer, _ = fit(tmp_path, callbacks, max_epochs=2, model=model)
    logged = {name for row in read_csv_metrics(trainer) for name in row}
    assert {"loss/advantage_p0", "eval/average/random/win_rate", "time/eval_share"} <= logged
    assert sorted(n for n in logged if not metrics.documented(n)) == []


def test_an_undocumented_name_is_caught():
    assert not metrics.documented("loss/advantage_0")
    assert not metrics.documented("eval/average/win_rate")
    assert metrics.documented("eval/current/heuristic:cautious/score_diff_ci_low")


def test_eval_names_keep_three_levels_for_checkpoint_opponents():
    assert metrics.eval_prefix("average", "ckpt:runs/a.ckpt") == "eval/average/ckpt:runs_a.ckpt/"
