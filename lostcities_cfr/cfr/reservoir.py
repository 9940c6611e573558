"""Reservoir buffers for Deep CFR's advantage and strategy memories.

Deep CFR (Brown, Lerer, Gross & Sandholm, 2019) keeps every sample it ever
produced in expectation: its memories are reservoirs, so after ``n`` rows were
offered each one is held with probability ``capacity / n`` whatever its age,
and a network trained on the reservoir sees every CFR iteration in proportion
to the samples it produced (linear CFR then weights each sample by its
iteration when training).

:class:`ReservoirBuffer` implements Vitter's Algorithm R ("Random sampling with
a reservoir", 1985) on preallocated tensors, vectorized over a whole batch of
rows yet exactly equal to offering the rows one at a time: the k-th row ever
offered (0-based) goes to slot k while the buffer fills, and afterwards to the
uniformly drawn slot ``j in [0, k]`` if ``j < capacity`` (else it is dropped).
:func:`reservoir_slots` is that rule as a pure function of the uniform draws.

Storage dtypes, chosen to fit millions of rows in memory:
- features float16 [capacity, F]: the encoding holds small counts (0..3, exact
  in float16) and fractions like ``(r + 1) / (R + 1)`` or the deck fraction,
  which float16's 11-bit significand keeps to a relative error below 5e-4, far
  under anything a network distinguishes.
- legal bool [capacity, A].
- targets float16 [capacity, A] by default: advantages are score differences
  (a few hundred points at most under external sampling, kept to 1 part in
  2048) and strategy probabilities lie in [0, 1] (absolute error below 2.5e-4).
  Estimators that divide by sampling probabilities (outcome sampling) can
  exceed float16's range of 65504; :meth:`ReservoirBuffer.add` refuses
  non-finite rows (:class:`~lostcities_cfr.errors.NonFiniteError`), and
  ``target_dtype=torch.float32`` stores them instead.
- iteration int32 [capacity]: the CFR iteration that produced the row.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from lostcities_cfr.arguments import PositiveInt, RightOpenUnitInterval, checked
from lostcities_cfr.errors import ConfigError, NonFiniteError


class ReservoirBatch(NamedTuple):
    """Rows drawn from a :class:`ReservoirBuffer`, ready for a loss."""

    features: torch.Tensor  # [n, F] float32
    legal: torch.Tensor  # [n, A] bool
    targets: torch.Tensor  # [n, A] float32
    iteration: torch.Tensor  # [n] int32; linear CFR weights a row by iteration ** exponent


def reservoir_slots(n_seen: int, capacity: int, uniforms: torch.Tensor) -> torch.Tensor:
    """Algorithm R's slot for each of ``n`` rows offered after ``n_seen`` earlier ones.

    ``uniforms`` [n] float64 in [0, 1) are the draws, one per row (rows that
    fill an empty slot ignore theirs). Returns int64 [n]: the slot each row is
    written to, or -1 for a row that is dropped. Several rows may name the same
    slot; offered one at a time the later one overwrites the earlier, so only
    the last of them survives.
    """
    k = n_seen + torch.arange(len(uniforms), device=uniforms.device)  # [n] index ever offered
    j = torch.minimum((uniforms * (k + 1)).long(), k)  # uniform in [0, k]
    return torch.where(k < capacity, k, torch.where(j < capacity, j, -1))


def last_writers(slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows whose writes survive, given each row's slot (-1 = dropped).

    Returns ``(rows, slots)``, both int64 [m] with distinct slots: for every
    slot named at least once, the last row that named it. Index assignment with
    repeated indices has no defined winner in torch, so the buffer writes only
    these rows.
    """
    rows = torch.nonzero(slots >= 0).squeeze(1)
    sorted_slots, order = torch.sort(slots[rows], stable=True)  # equal slots keep row order
    is_last = torch.ones_like(sorted_slots, dtype=torch.bool)
    is_last[:-1] = sorted_slots[1:] != sorted_slots[:-1]
    return rows[order[is_last]], sorted_slots[is_last]


class ReservoirBuffer:
    """A fixed-capacity reservoir of (features, legal mask, target, iteration) rows.

    Args:
        capacity: most rows held.
        n_features: F, the length of the encoding.
        n_actions: A, the number of action ids.
        device: where the rows (and the generator) live.
        seed: seeds the buffer's own generator, which draws both the
            replacement slots and (unless another is passed) the samples.
        target_dtype: storage dtype of the targets (see the module docstring).
        fifo: keep the newest ``capacity`` rows instead of a uniform sample of all
            (for a value network that follows a changing policy).
        holdout: share of the offered rows set aside, at random, in :attr:`held_out`
            (a buffer of ``holdout * capacity`` rows) and never trained on, so that a loss
            on them shows whether a network learns or memorises; 0 keeps none.
    """

    @checked
    def __init__(
        self,
        capacity: PositiveInt,
        n_features: PositiveInt,
        n_actions: PositiveInt,
        device: str | torch.device = "cpu",
        seed: int = 0,
        target_dtype: torch.dtype = torch.float16,
        fifo: bool = False,
        holdout: RightOpenUnitInterval = 0.0,
    ) -> None:
        self.capacity = capacity
        self.fifo = fifo
        self.holdout = holdout
        self.held_out: ReservoirBuffer | None = None
        if holdout > 0:
            self.held_out = ReservoirBuffer(
                max(1, round(holdout * capacity)),
                n_features,
                n_actions,
                device,
                seed=seed + 7919,  # its own stream: the main buffer's draws stay as they were
                target_dtype=target_dtype,
                fifo=fifo,
            )
        self.n_features = n_features
        self.n_actions = n_actions
        self.device = torch.device(device)
        self.features = torch.zeros(capacity, n_features, dtype=torch.float16, device=self.device)
        self.legal = torch.zeros(capacity, n_actions, dtype=torch.bool, device=self.device)
        self.targets = torch.zeros(capacity, n_actions, dtype=target_dtype, device=self.device)
        self.iteration = torch.zeros(capacity, dtype=torch.int32, device=self.device)
        self.n_seen = 0  # rows ever offered, kept or not
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)

    def __len__(self) -> int:
        """Rows held (held-out rows not counted)."""
        return min(self.n_seen, self.capacity)

    @property
    def memory_bytes(self) -> int:
        """Bytes of the preallocated storage."""
        return sum(t.nbytes for t in (self.features, self.legal, self.targets, self.iteration))

    def add(
        self,
        features: torch.Tensor,
        legal: torch.Tensor,
        targets: torch.Tensor,
        iteration: int | torch.Tensor,
    ) -> None:
        """Offer rows: features [n, F], legal [n, A] bool, targets [n, A], iteration int or [n].

        Equal to offering the n rows one after another under Algorithm R.
        """
        n = features.shape[0]
        for name, tensor, width in (
            ("features", features, self.n_features),
            ("legal", legal, self.n_actions),
            ("targets", targets, self.n_actions),
        ):
            if tensor.shape != (n, width):
                raise ValueError(
                    f"ReservoirBuffer.add: {name} has shape {tuple(tensor.shape)}; "
                    f"expected ({n}, {width})"
                )
        iteration = torch.as_tensor(iteration, dtype=torch.int32, device=self.device)
        if iteration.ndim and iteration.shape != (n,):
            raise ValueError(
                f"ReservoirBuffer.add: iteration has shape {tuple(iteration.shape)}; "
                f"expected an int or shape ({n},)"
            )
        stored_targets = targets.to(self.device, self.targets.dtype)
        # Checked before any draw, so a refused call leaves the buffer as it was.
        if not torch.isfinite(stored_targets).all():
            raise NonFiniteError(
                f"ReservoirBuffer.add: targets are not finite once stored as "
                f"{self.targets.dtype} (max |target| {targets.abs().max().item():.4g}); targets "
                "must be finite, and beyond 65504 need target_dtype=torch.float32"
            )
        if n == 0:
            return
        if self.held_out is not None:
            draws = torch.rand(n, generator=self.held_out.generator, device=self.device)
            held = draws < self.holdout  # [n]
            if held.any():
                kept = ~held
                iterations = iteration[held] if iteration.ndim else iteration
                self.held_out.add(features[held], legal[held], targets[held], iterations)
                features, legal, targets = features[kept], legal[kept], targets[kept]
                stored_targets = stored_targets[kept]
                iteration = iteration[kept] if iteration.ndim else iteration
                n = features.shape[0]
                if n == 0:
                    return
        if self.fifo:
            k = self.n_seen + torch.arange(n, device=self.device)  # [n] index ever offered
            rows, slots = last_writers(k % self.capacity)
        else:
            uniforms = torch.rand(
                n, generator=self.generator, dtype=torch.float64, device=self.device
            )
            rows, slots = last_writers(reservoir_slots(self.n_seen, self.capacity, uniforms))
        self.n_seen += n
        self.features[slots] = features.to(self.device, torch.float16)[rows]
        self.legal[slots] = legal.to(self.device)[rows]
        self.targets[slots] = stored_targets[rows]
        self.iteration[slots] = iteration[rows] if iteration.ndim else iteration

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> ReservoirBatch:
        """``batch_size`` rows drawn uniformly with replacement from the rows held.

        ``generator`` (on the buffer's device) defaults to the buffer's own.
        """
        if len(self) == 0:
            raise ValueError("ReservoirBuffer.sample: the buffer is empty; add rows first")
        index = torch.randint(
            len(self),
            (batch_size,),
            generator=generator if generator is not None else self.generator,
            device=self.device,
        )
        return ReservoirBatch(
            features=self.features[index].float(),
            legal=self.legal[index],
            targets=self.targets[index].float(),
            iteration=self.iteration[index],
        )

    def state_dict(self) -> dict[str, Any]:
        """Rows held, counters and generator state (enough to continue exactly).

        A full buffer's tensors are its storage itself (as ``nn.Module.state_dict`` shares
        its parameters), so that saving millions of rows needs no second copy of them; a
        partly filled one's rows are cloned, else saving would write the unused storage
        behind the slice too.
        """
        held = len(self)

        def rows(tensor: torch.Tensor) -> torch.Tensor:
            return tensor if held == self.capacity else tensor[:held].clone()

        return {
            "capacity": self.capacity,
            "n_seen": self.n_seen,
            "features": rows(self.features),
            "legal": rows(self.legal),
            "targets": rows(self.targets),
            "iteration": rows(self.iteration),
            "generator": self.generator.get_state(),
            "held_out": None if self.held_out is None else self.held_out.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` taken from a buffer of the same shape."""
        if state["capacity"] != self.capacity:
            raise ConfigError(
                f"ReservoirBuffer state has capacity={state['capacity']}; this buffer has "
                f"capacity={self.capacity} (build it with the checkpoint's capacity)"
            )
        features = state["features"]
        if features.shape[1] != self.n_features or state["targets"].shape[1] != self.n_actions:
            raise ConfigError(
                f"ReservoirBuffer state has F={features.shape[1]}, "
                f"A={state['targets'].shape[1]}; this buffer has F={self.n_features}, "
                f"A={self.n_actions} (rules of the checkpoint and the run differ)"
            )
        for name in ("features", "targets"):
            if not torch.isfinite(state[name]).all():
                # Refused before any row is written: the buffer stays as it was.
                raise NonFiniteError(
                    f"ReservoirBuffer state: {name} hold NaN or infinite values (a corrupted "
                    "checkpoint); rows are finite when added"
                )
        held = features.shape[0]
        self.features[:held] = features.to(self.device)
        self.legal[:held] = state["legal"].to(self.device)
        self.targets[:held] = state["targets"].to(self.device, self.targets.dtype)
        self.iteration[:held] = state["iteration"].to(self.device)
        self.n_seen = state["n_seen"]
        self.generator.set_state(state["generator"])
        if self.held_out is not None and state.get("held_out") is not None:
            self.held_out.load_state_dict(state["held_out"])
