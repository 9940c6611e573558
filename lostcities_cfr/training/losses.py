"""The losses of Deep CFR's networks, each sample weighted by the iteration that produced it.

Deep CFR (Brown, Lerer, Gross & Sandholm, "Deep Counterfactual Regret Minimization", ICML
2019) trains each player's advantage network to predict the instantaneous regrets sampled in
every iteration so far, and the strategy network to predict the strategies played so far.
Linear CFR (Brown & Sandholm, "Solving Imperfect-Information Games via Discounted Regret
Minimization", AAAI 2019) weights iteration ``t`` by ``t``: the regrets and the average
strategy then forget early, poor iterations faster. Here a row from iteration ``t`` weighs
``t ** exponent`` (1 is linear CFR, 0 the uniform average of vanilla CFR).

Predictive CFR (Farina, Kroer & Sandholm, "Faster Game Solving via Predictive Blackwell
Approachability", AAAI 2021) plays regret matching on the cumulative regret plus a prediction
of the next instantaneous regret, the last one: ``R_T + w_{T+1} r_T``. A network fitting the
weighted mean fits that sum, up to a positive factor regret matching ignores, when the rows
of the newest iteration ``T`` weigh ``T ** exponent + (T + 1) ** exponent`` (``newest=T``).

Weights are normalised to sum to 1 over each batch: only their ratios matter to the
minimiser, and normalising keeps a loss on the same scale at iteration 1000 as at iteration 1,
so the learning rate and gradient clipping mean the same thing throughout a run.
"""

from __future__ import annotations

import torch


def iteration_weights(
    iteration: torch.Tensor, exponent: float, newest: int | None = None
) -> torch.Tensor:
    """Per-row weights [n] float32, proportional to ``iteration ** exponent``, summing to 1;
    with ``newest``, that iteration's rows weigh ``(newest + 1) ** exponent`` more (predictive
    CFR's prediction).

    ``iteration`` [n] holds the (1-based) CFR iteration of each row.
    """
    weights = iteration.float().pow(exponent)
    if newest is not None:
        weights = weights + (iteration == newest) * float(newest + 1) ** exponent
    return weights / weights.sum()


def advantage_loss(
    outputs: torch.Tensor,  # [n, A] the advantage network's outputs
    legal: torch.Tensor,  # [n, A] bool
    regrets: torch.Tensor,  # [n, A] sampled instantaneous regrets, 0 on illegal actions
    iteration: torch.Tensor,  # [n] int
    exponent: float = 1.0,
    newest: int | None = None,
) -> torch.Tensor:
    """Weighted mean over rows of the squared error summed over the legal actions.

    The squared L2 distance between predicted and sampled regrets is Deep CFR's loss;
    illegal actions carry no target and no gradient.
    """
    squared = torch.where(legal, (outputs.float() - regrets) ** 2, 0.0).sum(dim=-1)  # [n]
    return (iteration_weights(iteration, exponent, newest) * squared).sum()


def strategy_loss(
    logits: torch.Tensor,  # [n, A] the strategy network's outputs
    legal: torch.Tensor,  # [n, A] bool
    strategies: torch.Tensor,  # [n, A] strategies played, 0 on illegal actions
    iteration: torch.Tensor,  # [n] int
    exponent: float = 1.0,
) -> torch.Tensor:
    """Weighted mean over rows of the cross-entropy from the played to the predicted strategy.

    The predicted strategy is the softmax of the logits over the legal actions. For a given
    information set the minimiser is the weighted mean of the strategies played there, which
    is the (linearly) averaged strategy that CFR's guarantees are about. Cross-entropy rather
    than the paper's squared error: its gradient does not vanish on actions whose predicted
    probability is near 0, so the network unlearns a wrong near-certain action faster.
    """
    masked = logits.float().masked_fill(~legal, torch.finfo(torch.float32).min)
    log_probs = torch.where(legal, torch.log_softmax(masked, dim=-1), 0.0)  # [n, A]
    cross_entropy = -(strategies * log_probs).sum(dim=-1)  # [n]
    return (iteration_weights(iteration, exponent) * cross_entropy).sum()
