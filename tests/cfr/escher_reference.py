"""ESCHER's walk as it was written before its steps read their counts once (issue 24): a
boolean index, ``nonzero()`` or ``.any()`` wherever a count was needed, each a host
synchronisation. Kept as the readable reference that the fixed-shape walk must equal row for
row (``test_escher_static.py``)."""

from __future__ import annotations

import torch

from lostcities_cfr.cfr.escher import ESCHERSampling
from lostcities_cfr.cfr.traversal import (
    TraversalContext,
    current_strategies,
    live_rows,
    sample_actions,
)
from lostcities_cfr.cfr.value_baseline import VALUE_NETWORK, value_mask
from lostcities_cfr.game import GameBatch
from lostcities_cfr.game.encoding import encode_history


class ReferenceESCHER(ESCHERSampling):
    """:class:`ESCHERSampling` with the walk of main at f980cdc."""

    def walk(self, games: GameBatch, context: TraversalContext) -> None:
        B, device = games.batch_size, games.device
        traverser, queue, generator = context.traverser, context.queue, context.generator
        games = games.clone()
        walker = torch.arange(B, device=device)  # [b] the trajectory of each row
        # The decision at which each trajectory turns on-policy (counted from its start).
        switch = games.turn + torch.randint(
            self.switch_range, (B,), generator=generator, device=device
        )  # [b]
        # On-policy states wait here for their trajectory's outcome: (walker, history
        # features, +1/-1 for the player to move being player 0 / 1, V(s) for player 0).
        value_rows: list[tuple[torch.Tensor, ...]] = []
        outcome = torch.zeros(B, device=device)  # [B] player 0's final return, or V at a cut

        while (next_rows := live_rows(games, [walker, switch])) is not None:
            games, (walker, switch), alive, live = next_rows
            context.stats.steps += 1  # (counted since, to compare the walks per step)
            legal = games.legal_mask()  # [b, A]
            features = games.encode()  # [b, F]
            turn, mover = games.turn, games.current_player  # [b] each
            to_player0 = 1.0 - 2.0 * mover.float()  # [b] +1 where player 0 moves
            cut = self.cut(turn, alive)
            # The on-policy states (value rows) and the cut ones; V is asked, in the same
            # flush as the strategies, where a target uses it: at a cut (the trajectory's
            # return) and, with td_lambda < 1, at every state (its bootstrap). With
            # td_lambda = 1 the on-policy states' own values would go unread.
            valued = (alive & ((turn > switch) | cut)).nonzero().squeeze(1)
            if len(valued):
                history = encode_history(games.select(valued))  # [v, H]
                priced = cut[valued] if self.td_lambda == 1 else torch.ones_like(cut[valued])
                asked = valued[priced]  # [p] the states whose V a target reads
                if len(asked):
                    value_ticket = queue.submit(VALUE_NETWORK, history[priced], value_mask(asked))
            mine = alive & ~cut & (mover == traverser)
            sampled = (mine & (turn < switch)).nonzero().squeeze(1)  # advantage rows
            if len(sampled):
                children = self.submit_children_values(
                    queue, games, sampled, legal[sampled], traverser
                )
            sigma = current_strategies(queue, games, features, legal, live)  # [b, A]
            context.stats.nodes += len(live)

            if len(valued):
                value = torch.zeros(len(valued), device=device)  # [v] V for player 0
                if len(asked):
                    value[priced] = to_player0[asked] * value_ticket.result()[:, 0].float()
                is_cut = cut[valued]
                outcome[walker[valued[is_cut]]] = value[is_cut]
                kept = ~is_cut
                value_rows.append(
                    (
                        walker[valued[kept]],
                        history[kept].half(),
                        to_player0[valued[kept]],
                        value[kept],
                    )
                )
            if cut.any():
                context.stats.truncated += int(cut.sum())
                games.done = games.done | cut
                alive = alive & ~cut
            if len(sampled):
                q = children()  # [n, A] the children's values for the traverser
                regrets = q - (sigma[sampled] * q).sum(1, keepdim=True)
                context.add_advantage_rows(
                    features[sampled], legal[sampled], regrets * legal[sampled]
                )
            theirs = (alive & (mover != traverser)).nonzero().squeeze(1)
            if len(theirs):
                context.add_strategy_rows(features[theirs], legal[theirs], sigma[theirs])

            explorers = (mine & (turn <= switch)).nonzero().squeeze(1)
            probs = self.playing_policy(games, explorers, sigma, legal)  # [b, A]
            actions = sample_actions(probs, generator)  # [b]; finished rows ignore theirs
            games.step(actions, check=False)
            ended = (games.done & alive).nonzero().squeeze(1)
            if len(ended):
                outcome[walker[ended]] = self.utility(games, 0, ended)

        self._write_value_rows(value_rows, outcome, context)

    def _write_value_rows(
        self,
        value_rows: list[tuple[torch.Tensor, ...]],
        outcome: torch.Tensor,
        context: TraversalContext,
    ) -> None:
        """TD(lambda) returns of the on-policy states, computed backwards; rows to the value
        buffer with the mover's return as the target.

        ``G_t = (1 - lambda) V(s_{t+1}) + lambda G_{t+1}`` along each trajectory, with the
        round's outcome after its last state (lambda = 1: the outcome itself).
        """
        lam = self.td_lambda
        seen = torch.zeros(len(outcome), dtype=torch.bool, device=outcome.device)  # [W]
        later_return, later_value = outcome.clone(), torch.zeros_like(outcome)  # [W] each
        for rows, history, to_player0, value in reversed(value_rows):
            bootstrapped = (1 - lam) * later_value[rows] + lam * later_return[rows]
            target = torch.where(seen[rows], bootstrapped, outcome[rows])  # [n] for player 0
            later_return[rows], later_value[rows], seen[rows] = target, value, True
            context.add_value_rows(history, to_player0 * target)  # the mover's return
