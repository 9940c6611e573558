"""Regret matching over predicted advantages, the policy rule of Deep CFR.

Deep CFR (Brown, Lerer, Gross & Sandholm, "Deep Counterfactual Regret
Minimization", ICML 2019) plays, at each information set, actions in
proportion to the positive part of the advantages its network predicts
(regret matching, Hart & Mas-Colell 2000). When no legal action has a positive
advantage, tabular regret matching plays uniformly; we follow the variant of
Steinberger ("Single Deep Counterfactual Regret Minimization", 2019, and his
Deep-CFR code; OpenSpiel's ``deep_cfr`` does the same) that instead puts all
probability on the legal action with the highest predicted advantage: an
approximate network's all-negative row still ranks the actions, and the
fallback keeps that ranking instead of discarding it.

Both functions have the inference queue's head signature ``(outputs, legal)``,
so the training loop hands them to :class:`~lostcities_cfr.inference.InferenceQueue`
as the head of an advantage network; the queue itself knows nothing of CFR.
:func:`uniform_strategy` is what tabular regret matching plays before any regret
exists: CFR's first iteration, exploration mixes and exploitability baselines use it.
"""

from __future__ import annotations

import torch


def regret_matching(advantages: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """Current strategy [B, A] from advantages [B, A] and legal mask [B, A] bool.

    Each row is the positive part of its legal advantages, normalised to sum
    to 1. A row in which no legal action has a positive advantage puts
    probability 1 on its legal action with the highest advantage (ties go to
    the lowest action id). Illegal actions always get exactly 0, and a row with
    no legal action at all (a finished game) is all zeros.
    """
    positive = torch.where(legal, advantages.clamp(min=0), 0)
    total = positive.sum(dim=-1, keepdim=True)  # [B, 1]
    # argmax returns the first maximal index, which breaks ties towards the lowest id.
    best = advantages.masked_fill(~legal, float("-inf")).argmax(dim=-1, keepdim=True)  # [B, 1]
    fallback = torch.zeros_like(positive).scatter_(-1, best, 1.0) * legal.any(-1, keepdim=True)
    safe_total = total.clamp(min=torch.finfo(total.dtype).tiny)  # no 0/0 in fallback rows
    return torch.where(total > 0, positive / safe_total, fallback)


def uniform_strategy(outputs: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """Uniform over the legal actions: float32 probabilities [B, A] from legal [B, A] bool.

    ``outputs`` is ignored. An untrained advantage network's outputs are small noise, on
    which regret matching would play the largest entry, so CFR's first iteration plays
    this instead. A row with no legal action is all zeros.
    """
    del outputs
    legal = legal.float()
    return legal / legal.sum(dim=-1, keepdim=True).clamp(min=1.0)
