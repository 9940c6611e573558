"""Train the search's belief over the opponent's hidden hand (``lostcities_cfr/search/belief.py``).

Plays ``--games`` rounds of each pairing (``best`` against itself, against
``heuristic:balanced`` from both seats, and against ``heuristic:cautious``), keeps every
decision with at most ``--max-deck`` cards in the deck (where the search runs), trains a
:class:`BeliefNet` on them and saves it; validation positions come from other deals. Prints
the validation cross-entropy of uniform worlds and of the trained belief, in nats per hidden
card, and the share of the opponent's hidden cards that a world deals it, uniform worlds
against the belief's, on positions of other games of ``best`` against itself.

    python scripts/tools/train_belief.py --out runs/belief/belief.pt   # 5 min
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from lostcities_cfr.agents import agent_from_spec
from lostcities_cfr.evaluation.arena import play_out
from lostcities_cfr.game import GameBatch, Rules
from lostcities_cfr.search import belief_keys, deal_worlds, world_keys
from lostcities_cfr.search.belief import (
    BeliefNet,
    collect_positions,
    hand_share_loss,
    save_belief,
    train_belief,
)
from lostcities_cfr.search.worlds import opponent_hidden

PAIRINGS = [
    ("best", "best"),
    ("best", "heuristic:balanced"),
    ("heuristic:balanced", "best"),
    ("best", "heuristic:cautious"),
]


def hidden_cards_dealt_right(
    belief: BeliefNet, games: int, seed: int, worlds: int = 32, max_deck: int = 20
) -> dict[str, float]:
    """The share of the opponent's hidden cards that a world deals it, uniform worlds against
    the belief's, at every seventh decision of ``games`` rounds of ``best`` against itself
    with at most ``max_deck`` cards in the deck (the search's positions)."""
    rules = belief.rules
    seats = (agent_from_spec("best", seed=seed), agent_from_spec("best", seed=seed + 1))
    right = {"uniform": 0.0, "belief": 0.0}
    total = 0

    def decide(batch: GameBatch, step: int, rows: torch.Tensor) -> torch.Tensor:
        nonlocal total
        live = ~batch.done & (batch.deck_count <= max_deck)
        if step % 7 == 0 and live.any():
            position = batch.select(live.nonzero().squeeze(1))
            truth = opponent_hidden(position)  # [P, T]
            total += int(truth.sum())
            generator = torch.Generator().manual_seed(seed + step)
            with torch.no_grad():
                log_weights = belief(position.encode())
            for name, keys in (
                ("uniform", world_keys(position, worlds, generator)),
                ("belief", belief_keys(position, log_weights, worlds, generator)),
            ):
                held = opponent_hidden(deal_worlds(position, keys))
                held = held.view(position.batch_size, worlds, -1)  # [P, W, T]
                right[name] += torch.minimum(held, truth[:, None]).sum().item() / worlds
        return seats[(step >> 1) & 1].act(batch)

    play_out(GameBatch.new(rules, games, seed=seed), decide, check=False)
    return {name: count / total for name, count in right.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="where to save the network")
    parser.add_argument("--games", type=int, default=12_000, help="rounds per pairing")
    parser.add_argument("--validation-games", type=int, default=500)
    parser.add_argument("--max-deck", type=int, default=24)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rules = Rules.classic()
    start = time.perf_counter()

    def positions(games: int, seed: int):
        pairings = [
            (agent_from_spec(a, seed=seed + 2 * i), agent_from_spec(b, seed=seed + 2 * i + 1))
            for i, (a, b) in enumerate(PAIRINGS)
        ]
        return collect_positions(rules, pairings, games, seed, args.max_deck)

    train = positions(args.games, args.seed)
    validation = positions(args.validation_games, args.seed + 10_000)
    print(
        f"{len(train):,} training and {len(validation):,} validation positions "
        f"({time.perf_counter() - start:.0f} s)",
        flush=True,
    )
    net = BeliefNet(rules, args.width, args.depth)
    with torch.no_grad():
        features = validation.features.float()
        uniform = hand_share_loss(
            torch.zeros(len(features), rules.n_types), features, validation.hidden, rules
        ).item()
    losses = train_belief(net, train, validation, epochs=args.epochs, seed=args.seed)
    about = {
        "pairings": [list(p) for p in PAIRINGS],
        "games_per_pairing": args.games,
        "max_deck": args.max_deck,
        "training_positions": len(train),
        "validation_loss_uniform": uniform,
        "validation_loss_by_epoch": losses[1:],
        "seed": args.seed,
    }
    about["hidden_cards_dealt_right"] = hidden_cards_dealt_right(net, 200, args.seed + 20_000)
    save_belief(net, args.out, **about)
    print(json.dumps(about, indent=2))
    dealt = about["hidden_cards_dealt_right"]
    print(
        f"validation cross-entropy per hidden card: uniform worlds {uniform:.4f} nats, belief "
        f"{min(losses[1:]):.4f}; hidden cards dealt right: uniform {dealt['uniform']:.1%}, "
        f"belief {dealt['belief']:.1%} ({time.perf_counter() - start:.0f} s); saved {args.out}"
    )


if __name__ == "__main__":
    main()
