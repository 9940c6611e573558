"""The learned best response beside the exact one, on tiny rules (docs/exploitability.md).

For each fixed strategy -- uniform play, the average strategy of a short Deep CFR run
(``configs/tiny_exact.yaml``'s model, ``--cfr-iterations`` iterations), ``heuristic:balanced``
and a heuristic that opens expeditions -- it computes the strategy's exact exploitability
(:mod:`lostcities_cfr.cfr.exploitability`: each seat's best response over the whole tree,
averaged), trains the approximate best response of ``python -m lostcities_cfr exploit`` for
``--minutes``, and reports the learner's exact value against the strategy (the same quantity:
points per game, the two seats averaged), its share of the exact one, and its estimate from
``--games`` duplicate games. Prints a markdown table, or ``--json``.

    python scripts/tools/tiny_best_response.py --minutes 2
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytorch_lightning as pl
import torch
import yaml
from pytorch_lightning.cli import instantiate_module

from lostcities_cfr.agents import Agent, HeuristicAgent, agent_from_spec
from lostcities_cfr.baselines.best_response import exact_value, measure, train_best_response
from lostcities_cfr.cfr import masked_softmax, uniform_strategy
from lostcities_cfr.cfr.exploitability import Policy, game_tree
from lostcities_cfr.cfr.networks import NetworkConfig
from lostcities_cfr.game import Rules
from lostcities_cfr.training import DeepCFR

TINY = Rules.tiny()
TINY_EXACT = Path(__file__).resolve().parents[2] / "configs" / "tiny_exact.yaml"
# The learner: tiny games are 8 decisions, so a small MLP learns fastest.
NETWORK = NetworkConfig(width=64, depth=2)
# A heuristic that opens expeditions on tiny rules (the presets never do: see heuristic_rows).
OPENING_HEURISTIC = "heuristic:balanced:open_margin=-0.5"
STRATEGIES = ("uniform", "cfr", "heuristic", "opening")


@dataclass
class Strategy:
    """A fixed strategy twice: as an agent to train against, as a policy for the exact tree."""

    name: str
    agent: Agent
    policy: Policy


class FeatureRows:
    """Feature rows dressed as the batch a :class:`HeuristicAgent` reads.

    The heuristic reads the features, the legal mask and the public turn counter; the
    counter only caps its pile draws (``max_pile_draws``, 40), and a tiny round lasts at most
    8 turns, so on tiny rules its choice is a function of the features alone (the test beside
    this script holds the two equal on real games).
    """

    def __init__(self, rules: Rules, features: torch.Tensor, legal: torch.Tensor) -> None:
        self.rules, self.features, self.legal = rules, features, legal
        self.batch_size, self.device = features.shape[0], features.device
        self.turn = torch.zeros(self.batch_size, dtype=torch.int64, device=self.device)
        self.compiled = False  # eager rules (GameBatch.compiled): nothing here to compile

    def encode(self) -> torch.Tensor:
        return self.features

    def legal_mask(self) -> torch.Tensor:
        return self.legal


def heuristic_policy(agent: HeuristicAgent) -> Policy:
    """The heuristic's (deterministic) choice on feature rows, as probabilities [n, A]."""

    def policy(features: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        actions = agent.act(FeatureRows(TINY, features, legal))  # [n]
        return torch.nn.functional.one_hot(actions, legal.shape[1]).float()

    return policy


def cfr_strategy(iterations: int, seed: int) -> Strategy:
    """The average strategy (strategy network) of ``configs/tiny_exact.yaml`` after
    ``iterations`` iterations."""
    model_config = yaml.safe_load(TINY_EXACT.read_text())["model"]
    model_config.update(final_eval_games=0, exploitability_every=0, seed=seed)
    pl.seed_everything(seed, verbose=False)  # before the networks are drawn
    model = instantiate_module(DeepCFR, model_config)
    pl.Trainer(
        max_epochs=iterations,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    ).fit(model)
    net = model.strategy_net.eval()

    @torch.no_grad()
    def policy(features: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        return masked_softmax(net(features), legal)

    return Strategy(f"Deep CFR, {iterations} iterations", model.agent("average", seed=seed), policy)


def strategies(cfr_iterations: int, seed: int, only: Sequence[str] = STRATEGIES) -> list[Strategy]:
    """The fixed strategies named in ``only`` (of :data:`STRATEGIES`), in that order."""
    makers = {
        "uniform": lambda: Strategy(
            "uniform (`random`)", agent_from_spec("random", seed=seed), uniform_strategy
        ),
        "cfr": lambda: cfr_strategy(cfr_iterations, seed),
        "heuristic": lambda: heuristic_strategy("heuristic:balanced"),
        "opening": lambda: heuristic_strategy(OPENING_HEURISTIC),
    }
    return [makers[name]() for name in only]


def heuristic_strategy(spec: str) -> Strategy:
    agent = agent_from_spec(spec)
    return Strategy(f"`{spec}`", agent, heuristic_policy(agent))


def compare(strategy: Strategy, minutes: float, games: int, seed: int) -> dict:
    """The exact best response's value and the learned one's, for one strategy."""
    tree = game_tree(TINY)
    probs = tree.policy_probs(strategy.policy)
    exact = [tree.best_response_value(probs, p) for p in (0, 1)]
    start = time.perf_counter()
    learned = train_best_response(
        strategy.agent, TINY, minutes=minutes, seed=seed, network=NETWORK, check_every=0
    )
    seconds = time.perf_counter() - start
    value = exact_value(learned, strategy.policy)
    measured = measure(learned, strategy.agent, games).rounds
    exploitability, learned_value = sum(exact) / 2, sum(value) / 2
    return {
        "strategy": strategy.name,
        "exploitability": exploitability,
        "exact_best_response": exact,
        "learned_value": learned_value,
        "learned_by_seat": list(value),
        "share": learned_value / exploitability if exploitability > 0 else None,
        "measured": measured.score_diff,
        "measured_ci": list(measured.score_diff_ci),
        "games": measured.n,
        "iterations": learned.iterations,
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=2.0, help="training per strategy (2)")
    parser.add_argument("--cfr-iterations", type=int, default=3, help="Deep CFR iterations (3)")
    parser.add_argument("--games", type=int, default=1000, help="measurement games (1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--strategies", nargs="+", choices=STRATEGIES, default=STRATEGIES, help="(all)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [
        compare(s, args.minutes, args.games, args.seed)
        for s in strategies(args.cfr_iterations, args.seed, args.strategies)
    ]
    if args.json:
        print(json.dumps({"minutes": args.minutes, "seed": args.seed, "rows": rows}, indent=2))
        return
    print(format_table(rows))


def format_table(rows: list[dict]) -> str:
    lines = [
        "| fixed strategy | exact exploitability (seat 0, seat 1) | learned best response, "
        "exact value (seat 0, seat 1) | share | learned, measured [95%] | training |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        r = {k: v + 0.0 if isinstance(v, float) else v for k, v in r.items()}  # no "-0.0000"
        r["learned_by_seat"] = [v + 0.0 for v in r["learned_by_seat"]]
        share = "n/a (0 = 0)" if r["share"] is None else f"{100 * r['share']:.1f}%"
        low, high = r["measured_ci"]
        lines.append(
            f"| {r['strategy']} | {r['exploitability']:.4f} ({r['exact_best_response'][0]:.4f}, "
            f"{r['exact_best_response'][1]:.4f}) | {r['learned_value']:.4f} "
            f"({r['learned_by_seat'][0]:.4f}, {r['learned_by_seat'][1]:.4f}) | {share} | "
            f"{r['measured']:+.3f} [{low:+.3f}, {high:+.3f}] | {r['iterations']} it., "
            f"{r['seconds']:.0f} s |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
