"""PPO by self-play against a pool of past policies: the baseline Deep CFR results stand beside;
or against one fixed agent: an approximate best response to it.

Proximal Policy Optimization (Schulman, Wolski, Dhariwal, Radford & Klimov, "Proximal Policy
Optimization Algorithms", 2017) with generalized advantage estimation (Schulman, Moritz,
Levine, Jordan & Abbeel, "High-Dimensional Continuous Control Using Generalized Advantage
Estimation", ICLR 2016), as CleanRL's ``ppo.py`` writes it (Huang et al., "The 37
Implementation Details of Proximal Policy Optimization", 2022): the clipped surrogate
objective, a value loss, an entropy bonus, advantages normalised per minibatch, one Adam
over both networks, gradient-norm clipping (:mod:`~lostcities_cfr.baselines.ppo_math`).

**Self-play against a pool.** The learner plays ``games_per_rollout`` rounds, half of them
from each seat, split into ``opponent_groups`` groups: a ``latest_share`` of the groups play
the current policy itself, the others each a snapshot drawn from a pool of the learner's
earlier policies (one taken every ``snapshot_every`` iterations, the latest ``pool_size``
kept), as in Bansal et al., "Emergent Complexity via Multi-Agent Competition" (ICLR 2018),
so that the learner does not forget how to beat what it used to be. The opponent is part of
the environment: only the learner's decisions are rows, and its reward is the round's final
score difference, over ``reward_scale``, plus ``win_bonus`` times its sign, at its last
decision (gamma 1: a round is short and only its end counts).

**Any game of the protocol** (``game/protocol.py``): ``rules`` names Lost Cities or any
:class:`~lostcities_cfr.game.protocol.Game` (``lostcities_cfr.game.poker.LeducPoker``), and
the rollouts ask the game only what the protocol offers. In poker the reward is the chips
won (zero-sum), and one network plays both seats: the features (OpenSpiel's
``information_state_tensor``) start with the observer's seat. On a game small enough to
walk whole, ``exploitability_every`` logs the policy's exact exploitability (as DeepCFR's
does), and :meth:`PPO.exact_policy` is what ``python -m lostcities_cfr nashconv`` measures.
What only Lost Cities has (agents of agent specs as teacher or opponent, colour networks,
the value network for a search) is refused in another game, naming the game.

**Against a fixed agent.** With ``opponent`` (an agent spec) or :meth:`PPO.play_against`
(an agent in memory), every game of a rollout is against that agent, half of them from each
seat, and the pool is not used: the learner becomes an approximate best response to it (ABR,
Timbers et al., "Approximate Exploitability: Learning a Best Response", IJCAI 2022;
:mod:`~lostcities_cfr.baselines.best_response`). The agent answers all of its games of a
step in one ``act`` call (a network agent: one batched forward).

**One iteration is one Lightning epoch:**

1. *rollout* (``on_train_epoch_start``; :mod:`~lostcities_cfr.baselines.ppo_rollout`): all
   games in lockstep as one batch of the game
   (:func:`~lostcities_cfr.baselines.rollout.play_games`); at each step one forward per
   network through the inference queue for every game where it is to move, actions sampled
   from the masked softmax;
2. *advantages*: the value network on every row, then GAE per game;
3. *update* (the epoch's training steps): ``update_epochs`` passes over the rows in
   ``minibatches`` shuffled minibatches, one Adam step each.

**Behaviour cloning warm start.** With ``bc_teacher`` (any agent spec), the first
``bc_iterations`` iterations are behaviour cloning instead
(:mod:`lostcities_cfr.baselines.behaviour_cloning`): the teacher plays ``games_per_rollout``
rounds against itself, and the same number of training steps fits the policy to its moves
and the value network to its rounds' returns.

The trained policy is :meth:`PPO.agent` (``"policy"``): the network's masked softmax,
played by :class:`~lostcities_cfr.agents.NetworkAgent` like every network agent.
"""

from __future__ import annotations

import time
from typing import Any

import pytorch_lightning as pl
import torch
from torch import nn

from lostcities_cfr.agents import Agent, NetworkAgent, agent_from_spec
from lostcities_cfr.arguments import (
    ClosedUnitInterval,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    checked,
)
from lostcities_cfr.baselines.behaviour_cloning import behaviour_cloning_loss
from lostcities_cfr.baselines.magnet import Magnet
from lostcities_cfr.baselines.ppo_arguments import (
    policy_name,
    refuse_lost_cities_options,
    resolve_network,
)
from lostcities_cfr.baselines.ppo_math import ppo_loss
from lostcities_cfr.baselines.ppo_rollout import PPORollout, Rows
from lostcities_cfr.baselines.rollout import LEARNER
from lostcities_cfr.cfr.game_tree import JointPolicy
from lostcities_cfr.cfr.networks import NetworkConfig, masked_softmax
from lostcities_cfr.errors import AgentSpecError, ConfigError
from lostcities_cfr.evaluation.arena import check_agent_rules
from lostcities_cfr.game import Rules
from lostcities_cfr.game.lost_cities import LostCities, as_game
from lostcities_cfr.game.protocol import Game
from lostcities_cfr.inference import InferenceQueue
from lostcities_cfr.search import StateValue
from lostcities_cfr.training import metrics
from lostcities_cfr.training.agents import exact_policy
from lostcities_cfr.training.checkpoint import MODEL_CLASS_KEY, class_path, plain_data
from lostcities_cfr.training.evaluation import check_exploitability_every, exploitability_metrics


class PPO(PPORollout, pl.LightningModule):
    """PPO with a self-play opponent pool and an optional behaviour-cloning warm start.

    Args:
        rules: the game: a Lost Cities preset name (``classic``, ``six-colors``, ``tiny``), a
            :class:`Rules`, or any :class:`~lostcities_cfr.game.protocol.Game` (in a config,
            its ``class_path``: ``lostcities_cfr.game.poker.LeducPoker``). A teacher or
            opponent agent and colour networks are Lost Cities' alone and refuse another
            game.
        network: a preset name (``512x3``, ``1024x6``) or a :class:`NetworkConfig`: the
            shape of the policy network and of the value network (one output). 128x2 by
            default: on one CPU thread, smaller networks see more games in the same time,
            and beat 256x2 at equal time (``docs/baselines.md``).
        games_per_rollout: rounds played per iteration (half from each seat).
        update_epochs: passes over an iteration's rows.
        minibatches: minibatches per pass (the rows of an iteration split evenly).
        learning_rate: Adam's step size, both networks.
        gamma: discount per decision (1: only the round's end counts).
        gae_lambda: GAE's lambda.
        clip: the clip range of the probability ratio.
        value_coef: weight of the value loss.
        entropy_coef: weight of the entropy bonus.
        max_grad_norm: largest gradient norm per step; 0 turns clipping off.
        reward_scale: the final score difference (poker: the chips won) is divided by
            this.
        win_bonus: plus this times the sign of the score difference (a win counts
            beyond its margin).
        opponent_groups: opponents per rollout (the games split evenly).
        latest_share: share of the groups whose opponent is the current policy; the
            others play snapshots drawn uniformly from the pool.
        snapshot_every: add the policy to the pool every this many PPO iterations.
        pool_size: snapshots kept (the latest).
        bc_teacher: agent spec to clone first (``heuristic:balanced``); ``None``: the
            ``opponent`` if there is one, else none.
        bc_iterations: iterations of behaviour cloning before PPO starts.
        opponent: agent spec of a fixed opponent (module docstring): every game is against
            it and ``opponent_groups``, ``latest_share``, ``snapshot_every`` and
            ``pool_size`` go unused; ``None``: self-play against the pool.
        magnet_coef: magnetic mirror descent's pull towards its magnet, ``alpha`` of
            :mod:`~lostcities_cfr.baselines.magnet` (the loss adds ``alpha KL(pi || rho)``);
            0: plain PPO.
        magnet_decay: how slowly the magnet follows the policy (once an iteration).
        exploitability_every: log the exact exploitability of the policy every this many
            iterations (``exploitability``, ``exploitability/vs_uniform``, ``nash_conv``, as
            ``DeepCFR`` logs them); 0 never. Games small enough to walk whole only (Kuhn,
            Leduc, tiny Lost Cities).
        seed: seeds the deals, the players' sampling, the pool draws and the minibatches
            (the fixed opponent's own sampling: ``seed + 2``). The CLI links it to
            ``seed_everything``. A resumed run restarts the fixed opponent's sampling
            from its seed.
    """

    policies = (LEARNER,)
    # The checkpoint entry only a resumed fit uses (the pool, the generators).
    training_state_key = "ppo"

    @checked
    def __init__(
        self,
        rules: Rules | Game | str = "classic",
        network: str | NetworkConfig = NetworkConfig(width=128, depth=2),  # noqa: B008 (frozen)
        games_per_rollout: PositiveInt = 512,
        update_epochs: PositiveInt = 2,
        minibatches: PositiveInt = 8,
        learning_rate: PositiveFloat = 1e-3,
        gamma: ClosedUnitInterval = 1.0,
        gae_lambda: ClosedUnitInterval = 0.95,
        clip: PositiveFloat = 0.2,
        value_coef: NonNegativeFloat = 0.5,
        entropy_coef: NonNegativeFloat = 0.01,
        max_grad_norm: NonNegativeFloat = 0.5,
        reward_scale: PositiveFloat = 100.0,
        win_bonus: NonNegativeFloat = 0.0,
        opponent_groups: PositiveInt = 4,
        latest_share: ClosedUnitInterval = 0.5,
        snapshot_every: PositiveInt = 5,
        pool_size: PositiveInt = 20,
        bc_teacher: str | None = None,
        bc_iterations: NonNegativeInt = 0,
        opponent: str | None = None,
        magnet_coef: NonNegativeFloat = 0.0,
        magnet_decay: ClosedUnitInterval = 0.9,
        exploitability_every: NonNegativeInt = 0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        if games_per_rollout < 2:
            raise ConfigError(
                f"PPO games_per_rollout={games_per_rollout}; expected at least 2 (a game from each seat)"
            )
        self.game = as_game(rules, "PPO")
        # Lost Cities' rules, for the parts only it has; None in another game.
        self.rules = self.game.rules if isinstance(self.game, LostCities) else None
        self.network_config = resolve_network(network)
        if self.rules is None:
            refuse_lost_cities_options(
                self.game, self.network_config, bc_teacher, bc_iterations, opponent
            )
        check_exploitability_every("PPO", exploitability_every, self.rules or self.game)
        self.teacher: Agent | None = None
        if bc_teacher is not None:
            try:
                self.teacher = agent_from_spec(bc_teacher, seed=seed)
                check_agent_rules(self.teacher, self.rules)  # now, not when cloning starts
            except (AgentSpecError, ConfigError) as error:
                raise ConfigError(f"PPO bc_teacher: {error}") from None
        elif bc_iterations and opponent is None:
            raise ConfigError(
                f"PPO bc_iterations={bc_iterations} needs a bc_teacher agent spec "
                "(e.g. heuristic:balanced) or an opponent to clone"
            )
        self.opponent: Agent | None = None
        if opponent is not None:
            try:
                clone = bc_iterations if bc_teacher is None else 0
                self.play_against(agent_from_spec(opponent, seed=seed + 2), clone)
            except (AgentSpecError, ConfigError) as error:
                raise ConfigError(f"PPO opponent: {error}") from None
        F, A = self.game.feature_size, self.game.n_actions
        self.policy_net = self.network_config.build(F, A, self.rules)
        self.value_net = self.network_config.build(F, 1, self.rules)
        self.magnet = Magnet(self.policy_net, magnet_decay) if magnet_coef > 0 else None
        # Snapshots of earlier policies (state dicts) and the networks that play them; the
        # latter are not submodules, so checkpoints hold the pool once, as plain tensors.
        self.pool: list[dict[str, torch.Tensor]] = []
        self._opponent_nets: list[nn.Module] = []
        self.queue = InferenceQueue(bucket_sizes=None)
        self.queue.register(LEARNER, self.policy_net, masked_softmax)
        self.rollout_generator = torch.Generator().manual_seed(seed)
        self.batch_generator = torch.Generator().manual_seed(seed + 1)
        self._resume_state: dict[str, Any] | None = None
        self.iteration_metrics: dict[str, float] = {}
        self._rows: Rows | None = None
        self._order = torch.empty(0, dtype=torch.int64)

    @property
    def iteration(self) -> int:
        """The iteration running (1-based): the Lightning epoch plus one."""
        return self.current_epoch + 1

    @property
    def cloning(self) -> bool:
        """Whether this iteration is behaviour cloning rather than PPO."""
        return self.iteration <= self.hparams.bc_iterations

    def play_against(
        self, agent: Agent, clone_iterations: int = 0, teacher: Agent | None = None
    ) -> None:
        """Play every later rollout against ``agent`` only (the ``opponent`` of an agent in
        memory, such as a policy being trained elsewhere).

        Args:
            agent: the fixed opponent.
            clone_iterations: the first this many iterations clone ``teacher``'s moves
                instead (it becomes the ``bc_teacher`` and this the ``bc_iterations``).
            teacher: whose moves to clone; by default ``agent``'s, so that the learner starts
                as a copy of what it answers. A stronger agent is a better start where PPO
                alone would not leave the copy's neighbourhood.

        Raises:
            ConfigError: the agent or the teacher plays other rules (names both), or the
                game is not Lost Cities (names it).
        """
        if self.rules is None:
            raise ConfigError(
                f"PPO.play_against: a fixed opponent agent plays Lost Cities only; the game "
                f"here is {self.game.name}"
            )
        check_agent_rules(agent, self.rules)
        self.opponent = agent
        if clone_iterations:
            if teacher is not None:  # the agent's rules are checked above
                try:
                    check_agent_rules(teacher, self.rules)
                except ConfigError as error:
                    raise ConfigError(f"teacher: {error}") from None
            self.teacher = agent if teacher is None else teacher
            self.hparams.bc_iterations = clone_iterations

    def agent(
        self, policy: str | None = None, greedy: bool = False, seed: int | None = None
    ) -> Agent:
        """A batched agent playing the policy network's masked softmax (``None``: the same)."""
        return NetworkAgent(
            self.policy_net, masked_softmax, greedy=greedy, seed=seed, name=policy_name(policy)
        )

    def exact_policy(self, policy: str | None = None, greedy: bool = False) -> JointPolicy:
        """The policy (``None``: the same) as the exact walk asks it: ``features [n, F],
        legal [n, A] -> probabilities [n, A]`` on the CPU, one network for both seats;
        ``greedy`` puts all the mass on the most probable action, as the greedy agent
        plays. What ``exploitability_every`` and ``nashconv --agent ckpt:PATH`` measure."""
        policy_name(policy)
        probabilities = exact_policy(self.policy_net, (), "average", greedy)
        device, dtype = self.device, self.dtype

        def on_device(features: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
            # the walk's tensors are float32 on the CPU; the network may live elsewhere
            return probabilities(features.to(device, dtype), legal.to(device)).cpu()

        return on_device

    def exploitability_metrics(self) -> dict[str, float]:
        """``exploitability`` of the policy (NashConv / 2), also as a share of the uniform
        policy's, and ``nash_conv``: what ``exploitability_every`` logs."""
        return exploitability_metrics(self.rules or self.game, self.exact_policy())

    def state_value(self) -> StateValue | None:
        """The value network in points, for a search to cut its rollouts with
        (``docs/search.md``). With ``win_bonus`` it also counts the bonus, in points. None
        in another game than Lost Cities, which the search's sampled worlds are."""
        if self.rules is None:
            return None
        return StateValue(self.value_net, history=False, scale=self.hparams.reward_scale)

    # ---- Lightning: setup ---------------------------------------------------------------------
    def configure_optimizers(self) -> torch.optim.Optimizer:
        parameters = [*self.policy_net.parameters(), *self.value_net.parameters()]
        return torch.optim.Adam(parameters, lr=self.hparams.learning_rate, eps=1e-5)

    def train_dataloader(self) -> range:
        # Step indices only: each step takes its minibatch from the iteration's rows.
        return range(self.hparams.update_epochs * self.hparams.minibatches)

    def setup(self, stage: str) -> None:
        # On the training device (a CUDA rollout samples with a CUDA generator).
        seed = self.hparams.seed
        self.rollout_generator = torch.Generator(self.device).manual_seed(seed)
        self.batch_generator = torch.Generator(self.device).manual_seed(seed + 1)

    def on_train_start(self) -> None:
        if self._resume_state is not None:
            self.pool = self._resume_state["pool"]
            self.rollout_generator.set_state(self._resume_state["rollout_generator"])
            self.batch_generator.set_state(self._resume_state["batch_generator"])
            self._resume_state = None

    # ---- Lightning: one iteration -------------------------------------------------------------
    def on_train_epoch_start(self) -> None:
        start = time.perf_counter()
        self.queue.reset_stats()
        with torch.no_grad():
            self._rows = self.clone_teacher() if self.cloning else self.rollout()
        self.iteration_metrics[metrics.phase_seconds("rollout")] = time.perf_counter() - start
        self.iteration_metrics[metrics.phase_seconds("policy_network")] = (
            self.queue.stats().policy_network_seconds
        )
        self.iteration_metrics[metrics.phase_seconds("update")] = 0.0
        self._sums: dict[str, float] = {}

    def training_step(self, step: int, batch_idx: int) -> None:
        start = time.perf_counter()
        minibatches = self.hparams.minibatches
        if batch_idx % minibatches == 0:  # a new pass: a new order
            self._order = torch.randperm(
                len(self._rows), generator=self.batch_generator, device=self.device
            )
        index = self._order.tensor_split(minibatches)[batch_idx % minibatches]
        rows = self._rows
        features, legal, actions = rows.features[index], rows.legal[index], rows.actions[index]
        logits = self.policy_net(features)
        values = self.value_net(features).squeeze(1)
        if self.cloning:
            policy_loss = behaviour_cloning_loss(logits, legal, actions)
            value_loss = 0.5 * (values - rows.returns[index]).square().mean()
            loss = policy_loss + self.hparams.value_coef * value_loss
            stats = {
                metrics.loss("bc"): policy_loss,
                metrics.loss("value"): value_loss,
                "bc/accuracy": (logits.masked_fill(~legal, -torch.inf).argmax(1) == actions)
                .float()
                .mean(),
            }
        else:
            terms = ppo_loss(
                logits,
                values,
                legal,
                actions,
                rows.log_probs[index],
                rows.advantages[index],
                rows.returns[index],
                self.hparams.clip,
                self.hparams.value_coef,
                self.hparams.entropy_coef,
            )
            loss = terms.loss
            stats = {
                metrics.loss("policy"): terms.policy,
                metrics.loss("value"): terms.value,
                metrics.loss("entropy"): terms.entropy,
                "ppo/approx_kl": terms.approx_kl,
                "ppo/clip_fraction": terms.clip_fraction,
            }
            if self.magnet is not None:  # magnetic mirror descent
                stats["mmd/magnet_kl"] = self.magnet.kl(terms.log_probs, features, legal)
                loss = loss + self.hparams.magnet_coef * stats["mmd/magnet_kl"]
        optimizer = self.optimizers()
        optimizer.zero_grad()
        self.manual_backward(loss)
        if self.hparams.max_grad_norm > 0:
            self.clip_gradients(optimizer, gradient_clip_val=self.hparams.max_grad_norm)
        optimizer.step()
        # Means over the iteration's steps, kept current: callbacks read them in
        # on_train_epoch_end, which Lightning calls before the module's own hook.
        steps = batch_idx + 1
        for name, value in stats.items():
            self._sums[name] = self._sums.get(name, 0.0) + value.item()
            self.iteration_metrics[name] = self._sums[name] / steps
        self.iteration_metrics[metrics.phase_seconds("update")] += time.perf_counter() - start

    def on_train_epoch_end(self) -> None:
        if self.magnet is not None:
            self.magnet.follow(self.policy_net)
        every = self.hparams.exploitability_every
        if every and self.iteration % every == 0:
            self.iteration_metrics.update(self.exploitability_metrics())
        snapshot = self.iteration % self.hparams.snapshot_every == 0
        if snapshot and not self.cloning and self.opponent is None:
            self.pool = [*self.pool, self._snapshot()][-self.hparams.pool_size :]
        self._rows = None
        self.log(metrics.ITERATION, float(self.iteration))
        self.log_dict(self.iteration_metrics)

    # ---- checkpoints ---------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Plain data only, so that the file loads with torch.load(weights_only=True); the
        # class is named for the checkpoint loader's allow-list.
        checkpoint[MODEL_CLASS_KEY] = class_path(type(self))
        checkpoint["hyper_parameters"] = plain_data(dict(checkpoint.get("hyper_parameters", {})))
        checkpoint[self.training_state_key] = {
            "pool": self.pool,
            "rollout_generator": self.rollout_generator.get_state(),
            "batch_generator": self.batch_generator.get_state(),
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # Applied in on_train_start, once setup has made the generators on the device.
        self._resume_state = checkpoint.get(self.training_state_key)
