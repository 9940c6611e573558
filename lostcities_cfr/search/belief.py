"""A learned belief over the opponent's hidden hand, for dealing the search's worlds.

Uniform worlds (:mod:`~lostcities_cfr.search.worlds`) hold every unseen card equally likely
to be in the opponent's hand. What the table shows says more: an opponent that has not
started green late in the round holds few green cards, and one whose expedition stops at a
card still unseen may be keeping the next. The belief network reads the player's own
features (its information state: nothing hidden, and no history, which the engine does not
keep) and gives each card type a log-weight ``l_t``; the worlds then deal the opponent's hidden hand by weighted sampling
without replacement (:func:`~lostcities_cfr.search.worlds.belief_keys`) and the deck's order
uniformly among the cards left. It is learned by supervised learning on positions of played
games, where the hidden hand is known, as Solinas, Rebstock and Buro learned the hands of
Skat's opponents for its perfect-information Monte Carlo search ("Improving Search with
Supervised Learning in Trick-Based Card Games", AAAI 2019).

**The loss.** With ``u_t`` the unseen copies of type ``t`` and ``h_t`` the opponent's hidden
copies (``k`` in all), the log-weights define the chance that one hidden card is of type
``t``, ``q_t = u_t e^{l_t} / sum_s u_s e^{l_s}``, and the loss is the cross-entropy
``-sum_t (h_t / k) log q_t``. Zero log-weights give ``q_t = u_t / sum_s u_s``: the uniform
worlds, whose loss is the baseline every trained belief is measured against. The loss fits
the share of one hidden card; dealing ``k`` cards without replacement by these weights gives
a hand a little flatter than those shares (a reason sharper weights were tried,
``docs/search.md``).

``scripts/tools/train_belief.py`` collects the positions, trains and saves the network, and
``search:BASE:belief=PATH`` searches with it. Measured (``docs/search.md``): a belief of the
information state alone deals more of the hidden cards right, and the search over ``best``
wins no more with it; the project ships none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn

from lostcities_cfr.agents.base import Agent
from lostcities_cfr.errors import AgentSpecError
from lostcities_cfr.evaluation.arena import play_out
from lostcities_cfr.game.batched import GameBatch
from lostcities_cfr.game.encoding import feature_blocks, feature_size
from lostcities_cfr.game.rules import Rules
from lostcities_cfr.search.worlds import opponent_hidden


class BeliefNet(nn.Module):
    """Features of the player to move [B, F] -> log-weights [B, T] of the opponent holding
    each card type (module docstring). An MLP of ``depth`` hidden layers of ``width``."""

    def __init__(self, rules: Rules, width: int = 256, depth: int = 2) -> None:
        super().__init__()
        self.rules, self.width, self.depth = rules, width, depth
        layers: list[nn.Module] = []
        size = feature_size(rules)
        for _ in range(depth):
            layers += [nn.Linear(size, width), nn.ReLU()]
            size = width
        layers.append(nn.Linear(size, rules.n_types))
        self.layers = nn.Sequential(*layers)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layers(features)


def hand_share_loss(
    log_weights: torch.Tensor, features: torch.Tensor, hidden: torch.Tensor, rules: Rules
) -> torch.Tensor:
    """Mean cross-entropy of the hidden hands ``hidden`` [n, T] (copies) under the shares
    ``q`` that ``log_weights`` [n, T] give the unseen cards of ``features`` [n, F] (module
    docstring); positions without a hidden card count for nothing."""
    unseen = features[:, feature_blocks(rules)["unseen"]].float()  # [n, T]
    possible = unseen > 0
    logits = (log_weights + unseen.clamp(min=1).log()).masked_fill(~possible, -torch.inf)
    log_q = torch.log_softmax(logits, dim=1).masked_fill(~possible, 0.0)  # [n, T]
    k = hidden.sum(1, keepdim=True).float()  # [n, 1]
    cross_entropy = -(hidden.float() / k.clamp(min=1) * log_q).sum(1)  # [n], 0 where k = 0
    return cross_entropy.sum() / (k > 0).sum().clamp(min=1)


class Positions(NamedTuple):
    """Positions of played games: what the player to move saw and what it could not."""

    features: torch.Tensor  # [n, F] float16: the player to move's features
    hidden: torch.Tensor  # [n, T] int8: the opponent's hand less its known copies

    def __len__(self) -> int:
        return len(self.features)


def collect_positions(
    rules: Rules,
    pairings: Sequence[tuple[Agent, Agent]],
    games: int,
    seed: int,
    max_deck: int | None = None,
) -> Positions:
    """Every decision of ``games`` rounds of each pairing (first agent in seat 0), dealt from
    ``seed`` (plus the pairing's index), where the deck holds at most ``max_deck`` cards
    (None: every decision)."""
    features, hidden = [], []
    for index, seats in enumerate(pairings):

        def decide(
            batch: GameBatch, step: int, rows: torch.Tensor, seats: tuple[Agent, Agent] = seats
        ) -> torch.Tensor:
            mover = (step >> 1) & 1  # lockstep games share the player to move
            actions = seats[mover].act(batch)
            keep = ~batch.done
            if max_deck is not None:
                keep &= batch.deck_count <= max_deck
            live = keep.nonzero().squeeze(1)
            features.append(batch.encode()[live].half())
            hidden.append(opponent_hidden(batch)[live].to(torch.int8))
            return actions

        play_out(GameBatch.new(rules, games, seed=seed + index), decide, check=False)
    return Positions(torch.cat(features), torch.cat(hidden))


def train_belief(
    net: BeliefNet,
    train: Positions,
    validation: Positions,
    epochs: int = 3,
    batch_size: int = 1024,
    lr: float = 1e-3,
    seed: int = 0,
) -> list[float]:
    """Adam on :func:`hand_share_loss`, the learning rate halved every epoch; keeps the
    weights with the lowest validation loss, those before training included (a NaN loss is
    never the lowest). Returns the validation loss before training (the uniform worlds' when
    the last layer starts at zero) and after each epoch."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    rules = net.rules

    def validation_loss() -> float:
        with torch.no_grad():
            features = validation.features.float()
            return hand_share_loss(net(features), features, validation.hidden, rules).item()

    losses = [validation_loss()]
    best, lowest = {k: v.clone() for k, v in net.state_dict().items()}, losses[0]
    for epoch in range(epochs):
        for group in optimizer.param_groups:
            group["lr"] = lr * 0.5**epoch
        order = torch.randperm(len(train), generator=generator)
        for start in range(0, len(train), batch_size):
            rows = order[start : start + batch_size]
            features = train.features[rows].float()
            loss = hand_share_loss(net(features), features, train.hidden[rows], rules)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        loss = validation_loss()
        losses.append(loss)
        if loss == loss and not loss >= lowest:  # lower, or the first not NaN; NaN never
            best, lowest = {k: v.clone() for k, v in net.state_dict().items()}, loss
    net.load_state_dict(best)
    return losses


def save_belief(net: BeliefNet, path: str | Path, **about: object) -> None:
    """Write the network, its shape and rules, and ``about`` (how it was made) to ``path``."""
    torch.save(
        {
            "rules": dataclasses.asdict(net.rules),
            "width": net.width,
            "depth": net.depth,
            "state_dict": net.state_dict(),
            "about": about,
        },
        path,
    )


def load_belief(path: str | Path) -> BeliefNet:
    """The network :func:`save_belief` wrote to ``path``.

    Raises:
        AgentSpecError: no such file, or not a belief network's.
    """
    path = Path(path)
    if not path.is_file():
        raise AgentSpecError(
            f"belief={path}: no such file (scripts/tools/train_belief.py makes one)"
        )
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        net = BeliefNet(Rules(**saved["rules"]), saved["width"], saved["depth"])
        net.load_state_dict(saved["state_dict"])
    except Exception as error:  # any unreadable file: name it, with the reason
        raise AgentSpecError(f"belief={path}: not a belief network ({error})") from None
    return net.eval()
