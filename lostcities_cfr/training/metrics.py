"""Every metric name a run logs, built in one place, and the table ``docs/architecture.md`` shows.

Names with a part that varies (a network, a policy, an opponent) come from the functions
below; fixed names are constants. :data:`METRICS` documents each name (as a pattern with
``<...>`` for the varying part), who logs it and what it means; ``docs/architecture.md``
("Logged metrics") is :func:`markdown_table`, and a test holds the two equal and checks
that every column a run writes matches a pattern here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lostcities_cfr.evaluation.arena import EvaluationResult, Outcome

ITERATION = "iteration"  # the x-axis of every chart
LIGHTNING_COLUMNS = ("epoch", "step")  # what Lightning's loggers add to every row


def loss(network: str) -> str:
    """``loss/<network>``: a network's mean weighted training loss over the iteration."""
    return f"loss/{network}"


def buffer_rows(buffer: str) -> str:
    """``buffer/<buffer>``: rows the named buffer holds."""
    return f"buffer/{buffer}"


def buffer_fill(buffer: str) -> str:
    """``buffer/<buffer>_fill``: rows held over capacity."""
    return f"buffer/{buffer}_fill"


def phase_seconds(phase: str) -> str:
    """``time/<phase>_s``: seconds of one phase of the iteration."""
    return f"time/{phase}_s"


def phase_share(phase: str) -> str:
    """``time/<phase>_share``: a phase's seconds over ``time/iteration_s``."""
    return f"time/{phase}_share"


def eval_prefix(policy: str, opponent: str, root: str = "eval") -> str:
    """``eval/<policy>/<opponent>/``; a ``/`` in the opponent's spec (a checkpoint path)
    becomes ``_`` so that the metric tree keeps three levels."""
    return f"{root}/{policy}/{opponent.replace('/', '_')}/"


def eval_metrics(
    policy: str, opponent: str, result: EvaluationResult, root: str = "eval"
) -> dict[str, float]:
    """The logged figures of one evaluation of ``policy`` against ``opponent``: the win rate
    and the score difference per game, each with its 95% interval bounds, under ``root``."""
    prefix = eval_prefix(policy, opponent, root)
    rounds = result.rounds
    return {
        prefix + "win_rate": rounds.win_rate,
        prefix + "win_rate_ci_low": rounds.win_rate_ci[0],
        prefix + "win_rate_ci_high": rounds.win_rate_ci[1],
        prefix + "score_diff": rounds.score_diff,
        prefix + "score_diff_ci_low": rounds.score_diff_ci[0],
        prefix + "score_diff_ci_high": rounds.score_diff_ci[1],
    }


def best_metrics(policy: str, opponent: str, result: EvaluationResult) -> dict[str, float]:
    """``best/<policy>/<opponent>/...``: :func:`eval_metrics` of the measurement that
    ``BestCheckpoint`` selects ``best.ckpt`` on (its own deals, not the learning curve's)."""
    return eval_metrics(policy, opponent, result, root="best")


def exploit_metrics(rounds: Outcome, seconds: float) -> dict[str, float]:
    """``exploit/*``: a learned best response's outcome against a policy, and the seconds it
    took to train and measure (``BestResponseProbe``)."""
    return {
        "exploit/score_diff": rounds.score_diff,
        "exploit/score_diff_ci_low": rounds.score_diff_ci[0],
        "exploit/score_diff_ci_high": rounds.score_diff_ci[1],
        "exploit/win_rate": rounds.win_rate,
        "exploit/win_rate_ci_low": rounds.win_rate_ci[0],
        "exploit/win_rate_ci_high": rounds.win_rate_ci[1],
        "exploit/seconds": seconds,
    }


@dataclass(frozen=True)
class Metric:
    """One documented metric: its name (``<...>`` marks a varying part), who logs it, what
    it means."""

    names: tuple[str, ...]
    logged_by: str
    meaning: str

    def matches(self, name: str) -> bool:
        """Whether a logged column ``name`` is one of these."""
        return any(_pattern(n).fullmatch(name) for n in self.names)


# DeepCFR's figures that count work or rows: a DDP run logs their sum over its ranks (each
# rank walks its own games into its own buffers); every other figure is averaged.
SUMMED_OVER_RANKS = frozenset(
    {
        "traversal/nodes",
        "traversal/nodes_per_s",
        "traversal/advantage_rows",
        "traversal/advantage_rows_per_s",
        *(buffer_rows(name) for name in ("advantage_p0", "advantage_p1", "strategy", "value")),
    }
)


def _pattern(name: str) -> re.Pattern[str]:
    parts = re.split(r"<[^>]+>", name)
    return re.compile("[^/]+".join(re.escape(part) for part in parts))


METRICS: tuple[Metric, ...] = (
    Metric(
        ("time/traversal_s", "traversal/nodes", "traversal/nodes_per_s"),
        "`DeepCFR`",
        "the traversal epoch of both players: seconds, decision nodes visited, their rate "
        "(nodes and rate summed over DDP ranks, seconds averaged, as every figure not said "
        "to be summed)",
    ),
    Metric(
        ("traversal/advantage_rows", "traversal/advantage_rows_per_s"),
        "`DeepCFR`",
        "advantage rows the traversal epoch wrote (both players) and their rate, summed over "
        "ranks: the sampler's yield",
    ),
    Metric(
        ("traversal/truncated_share",),
        "`DeepCFR`",
        "share of the traversals the sampler cut short (`ESCHERSampling.max_decisions`)",
    ),
    Metric(
        ("time/policy_network_s", "inference/mean_batch"),
        "`DeepCFR`",
        "seconds inside the inference queue's forwards; rows per forward",
    ),
    Metric(("time/memory_add_s",), "`DeepCFR`", "seconds writing rows into the reservoirs"),
    Metric(
        ("time/advantage_train_s", "time/strategy_train_s", "time/value_train_s"),
        "`DeepCFR`",
        "seconds of the training epoch's updates, per kind of network",
    ),
    Metric(
        ("loss/advantage_p0", "loss/advantage_p1", "loss/strategy", "loss/value"),
        "`DeepCFR`",
        "mean weighted loss over the iteration's updates (`value`: the history value "
        "network of a value-baseline sampler; `PPO` logs its value network's loss there too)",
    ),
    Metric(
        ("loss/val_<network>", "loss/val_zero_<network>"),
        "`DeepCFR` (`holdout`)",
        "after training, each network's loss on its buffer's held-out rows, and the loss of "
        "predicting zeros there: a network that learns beats the zero predictor",
    ),
    Metric(
        ("buffer/advantage_p0", "buffer/advantage_p1", "buffer/strategy", "buffer/value"),
        "`DeepCFR`",
        "rows held by each buffer, summed over ranks",
    ),
    Metric(
        ("exploitability", "exploitability/vs_uniform", "nash_conv"),
        "`DeepCFR`, `PPO` (`exploitability_every`)",
        "exact exploitability of the deployed policy (NashConv / 2), over the uniform policy's, "
        "and NashConv, on a game walked whole (Kuhn, Leduc, tiny rules)",
    ),
    Metric(
        (
            "time/rollout_s",
            "rollout/games",
            "rollout/decisions",
            "rollout/learner_decisions",
            "rollout/decisions_per_s",
            "rollout/game_length",
        ),
        "`PPO`",
        "the iteration's games (while cloning, the teacher's): seconds, rounds, decisions of "
        "both players, the learner's, decisions per second, mean turns per round",
    ),
    Metric(
        ("rollout/score_diff", "rollout/win_rate", "ppo/pool_size"),
        "`PPO`",
        "the learner against its rollout's opponents (the current policy and pool snapshots, "
        "or the fixed `opponent`): "
        "mean score difference, share of rounds won; snapshots in the pool",
    ),
    Metric(
        (
            "time/update_s",
            "loss/policy",
            "loss/entropy",
            "ppo/approx_kl",
            "ppo/clip_fraction",
            "ppo/explained_variance",
        ),
        "`PPO`",
        "the update epochs: seconds; mean clipped surrogate (negated), policy entropy, KL "
        "estimate to the rollout's policy, share of clipped rows; how much of the returns' "
        "variance the value network explains",
    ),
    Metric(
        ("mmd/magnet_kl",),
        "`PPO` (`magnet_coef` above 0)",
        "magnetic mirror descent: mean KL divergence from the policy to its magnet",
    ),
    Metric(
        ("expert/labels", "expert/labels_per_s", "expert/deviation_share", "buffer/expert"),
        "`ExpertIteration`",
        "the round's self-play: decisions the search labelled, labels per second of the "
        "round's games (the labelling rate), share of them where the search played another "
        "action than the network's most probable; rows the reservoir holds",
    ),
    Metric(
        ("loss/expert", "expert/agreement"),
        "`ExpertIteration`",
        "the round's updates: cross-entropy of the policy to the search's soft targets, "
        "share of rows whose most probable action is the target's (its value network logs "
        "`loss/value`, its games `time/rollout_s` and `rollout/*`, its updates `time/update_s`)",
    ),
    Metric(
        ("ppo/games", "ppo/decisions", "ppo/decisions_per_s"),
        "`ExpertIteration` (`ppo_games`)",
        "the round's self-play for PPO, without search: games, decisions of both seats, "
        "decisions per second (its seconds count in `time/rollout_s`; its updates log PPO's "
        "`loss/policy`, `loss/entropy`, `ppo/approx_kl`, `ppo/clip_fraction` and "
        "`ppo/explained_variance`)",
    ),
    Metric(
        ("loss/bc", "bc/accuracy"),
        "`PPO` (`bc_teacher`, first `bc_iterations`)",
        "behaviour cloning: cross-entropy to the teacher's moves, share of moves it would pick",
    ),
    Metric(
        (
            "time/iteration_s",
            "time/elapsed_s",
            "time/<phase>_share",
            "time/other_share",
            "time/eval_s",
        ),
        "`PhaseTimer`",
        "the whole iteration, the run's clock at its end, and each phase's share of it",
    ),
    Metric(
        (
            "buffer/<name>_fill",
            "system/rss_gb",
            "system/max_rss_gb",
            "system/cuda_max_allocated_gb",
        ),
        "`PhaseTimer`",
        "reservoir fill (0 to 1) and memory",
    ),
    Metric(
        (
            "eval/<policy>/<opponent>/win_rate",
            "eval/<policy>/<opponent>/win_rate_ci_low",
            "eval/<policy>/<opponent>/win_rate_ci_high",
            "eval/<policy>/<opponent>/score_diff",
            "eval/<policy>/<opponent>/score_diff_ci_low",
            "eval/<policy>/<opponent>/score_diff_ci_high",
        ),
        "`PeriodicEvaluation`; `DeepCFR` (`final_eval_games`, `average` policy, after the "
        "last iteration)",
        "duplicate games of a policy against an opponent: Wilson interval on the win rate, "
        "Student-t on the score difference per game",
    ),
    Metric(
        ("eval/seconds", "eval/amortized_s", "eval/results"),
        "`PeriodicEvaluation`",
        "one evaluation's seconds, evaluation seconds per iteration so far, all results as "
        "rows (a W&B table)",
    ),
    Metric(
        (
            "best/<policy>/<opponent>/win_rate",
            "best/<policy>/<opponent>/win_rate_ci_low",
            "best/<policy>/<opponent>/win_rate_ci_high",
            "best/<policy>/<opponent>/score_diff",
            "best/<policy>/<opponent>/score_diff_ci_low",
            "best/<policy>/<opponent>/score_diff_ci_high",
            "best/iteration",
        ),
        "`BestCheckpoint`",
        "the deployed policy against the selection opponent on the selection deals, and the "
        "iteration `best.ckpt` holds (the highest lower bound of the win rate so far)",
    ),
    Metric(
        (
            "exploit/score_diff",
            "exploit/score_diff_ci_low",
            "exploit/score_diff_ci_high",
            "exploit/win_rate",
            "exploit/win_rate_ci_low",
            "exploit/win_rate_ci_high",
            "exploit/seconds",
        ),
        "`BestResponseProbe`",
        "a small best response learned against the deployed policy, on held-out deals: "
        "points per game it wins (a lower bound on exploitability), its win rate; the "
        "probe's seconds",
    ),
    Metric(
        ("compile/seconds", "compile/inference", "compile/training"),
        "`CompileToggle`",
        "compile and warm-up seconds; 1 where compiled",
    ),
)


def documented(name: str) -> bool:
    """Whether a logged column ``name`` is documented in :data:`METRICS`, or is the x-axis
    or one of Lightning's own columns."""
    if name == ITERATION or name in LIGHTNING_COLUMNS:
        return True
    return any(metric.matches(name) for metric in METRICS)


def markdown_table() -> str:
    """The "Logged metrics" table of ``docs/architecture.md``."""
    lines = ["| metric | logged by | what |", "|---|---|---|"]
    for metric in METRICS:
        names = ", ".join(f"`{name}`" for name in metric.names)
        lines.append(f"| {names} | {metric.logged_by} | {metric.meaning} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
