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


def reservoir_slots(k: torch.Tensor, capacity: int, uniforms: torch.Tensor) -> torch.Tensor:
    """Algorithm R's slot for each of ``n`` rows, the row of index ``k`` being the k-th row
    ever offered (0-based).

    ``k`` [n] int64 and ``uniforms`` [n] float64 in [0, 1), one draw per row (rows that
    fill an empty slot ignore theirs). Returns int64 [n]: the slot each row is written to,
    or -1 for a row that is dropped. Several rows may name the same slot; offered one at a
    time the later one overwrites the earlier, so only the last of them survives.
    """
    j = torch.minimum((uniforms * (k + 1)).long(), k)  # uniform in [0, k]
    return torch.where(k < capacity, k, torch.where(j < capacity, j, -1))


def surviving_slots(slots: torch.Tensor, spare: int) -> torch.Tensor:
    """Each row's slot where its write survives, else ``spare`` ([n] int64, rows in order).

    ``slots`` [n] int64 name each row's slot, -1 for a row that is dropped. Of the rows
    naming the same slot, offered one at a time, only the last one's write survives; index
    assignment with repeated indices has no defined winner in torch, so the others (and
    the dropped rows) are sent to the spare row, whose content nobody reads. Fixed shapes:
    no row count leaves the device.
    """
    sorted_slots, order = torch.sort(slots, stable=True)  # equal slots keep row order
    is_last = torch.ones_like(sorted_slots, dtype=torch.bool)
    is_last[:-1] = sorted_slots[1:] != sorted_slots[:-1]
    kept = torch.where(is_last & (sorted_slots >= 0), sorted_slots, spare)
    return torch.empty_like(slots).scatter_(0, order, kept)


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
        # The storage has one spare row past the capacity, for the writes that do not survive
        # (surviving_slots); the public tensors are views of the capacity's rows.
        rows, device = capacity + 1, self.device
        self._storage = (
            torch.zeros(rows, n_features, dtype=torch.float16, device=device),
            torch.zeros(rows, n_actions, dtype=torch.bool, device=device),
            torch.zeros(rows, n_actions, dtype=target_dtype, device=device),
            torch.zeros(rows, dtype=torch.int32, device=device),
        )
        self.features, self.legal, self.targets, self.iteration = (
            t[:capacity] for t in self._storage
        )
        # Counters on the device, so that adding rows never waits for it: rows ever offered,
        # kept or not, and rows refused for their non-finite targets (check_finite).
        self._seen = torch.zeros((), dtype=torch.int64, device=self.device)
        self._refused = torch.zeros((), dtype=torch.int64, device=self.device)
        self._known_filled = False  # once rows are known to be held, sample() checks no more
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)

    @property
    def n_seen(self) -> int:
        """Rows ever offered (kept or not, held-out ones not counted): read from the device."""
        return int(self._seen)

    def __len__(self) -> int:
        """Rows held (held-out rows not counted); reads the count from the device."""
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

        Equal to offering the n rows one after another under Algorithm R, but for rows whose
        targets are not finite once stored (NaN, or beyond float16's range): those are
        refused, neither written nor counted, and :meth:`check_finite` reports them. Nothing
        here waits for the device: the slots are computed and written in fixed shapes, the
        counters stay on the device.
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
        if isinstance(iteration, int):  # a fill, not a copy from the host (which waits for a GPU)
            iteration = torch.full((n,), iteration, dtype=torch.int32, device=self.device)
        iteration = iteration.to(self.device, torch.int32)
        if iteration.ndim == 0:
            iteration = iteration.expand(n)
        if iteration.shape != (n,):
            raise ValueError(
                f"ReservoirBuffer.add: iteration has shape {tuple(iteration.shape)}; "
                f"expected an int or shape ({n},)"
            )
        if n == 0:
            return
        features = features.to(self.device, torch.float16)
        legal = legal.to(self.device)
        targets = targets.to(self.device, self.targets.dtype)
        offered = torch.isfinite(targets).all(1)  # [n]
        self._refused += n - offered.sum()
        if self.held_out is not None:
            held = torch.rand(n, generator=self.held_out.generator, device=self.device)
            held = held < self.holdout  # [n]
            self.held_out._write(features, legal, targets, iteration, offered & held)
            offered &= ~held
        self._write(features, legal, targets, iteration, offered)

    def _write(
        self,
        features: torch.Tensor,
        legal: torch.Tensor,
        targets: torch.Tensor,
        iteration: torch.Tensor,
        offered: torch.Tensor,
    ) -> None:
        """Offer the rows where ``offered`` [n] holds (Algorithm R, or FIFO); every row is
        written, those that do not survive to the spare row."""
        n = len(offered)
        rank = offered.cumsum(0)  # [n] offered rows so far in this call
        k = self._seen + rank - 1  # [n] index ever offered, of the offered rows
        if self.fifo:
            slots = k % self.capacity
        else:
            uniforms = torch.rand(
                n, generator=self.generator, dtype=torch.float64, device=self.device
            )
            slots = reservoir_slots(k, self.capacity, uniforms)
        slots = surviving_slots(torch.where(offered, slots, -1), spare=self.capacity)
        self._seen += rank[-1]
        for storage, values in zip(
            self._storage, (features, legal, targets, iteration), strict=True
        ):
            storage.index_copy_(0, slots, values)

    def clear(self) -> None:
        """Forget every row (held-out ones too): the next :meth:`add` starts an empty buffer.

        For rows that are only valid within one iteration (bootstrapped cumulative regrets,
        :mod:`~lostcities_cfr.cfr.cumulative_regret`); the storage is kept and overwritten.
        """
        self._seen.zero_()
        self._known_filled = False
        if self.held_out is not None:
            self.held_out.clear()

    def check_finite(self) -> None:
        """Raise :class:`~lostcities_cfr.errors.NonFiniteError` if any row offered so far
        had a target that was not finite once stored (it was refused, so the buffer holds
        finite rows only); reads a count from the device."""
        refused = int(self._refused)
        if refused:
            raise NonFiniteError(
                f"ReservoirBuffer.add: {refused} offered rows had targets that are not finite "
                f"once stored as {self.targets.dtype}, and were refused; targets must be finite, "
                "and beyond 65504 need target_dtype=torch.float32"
            )

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> ReservoirBatch:
        """``batch_size`` rows drawn uniformly with replacement from the rows held.

        ``generator`` (on the buffer's device) defaults to the buffer's own. The row
        indices are drawn on the device from its count of rows (``floor(u * held)`` with
        ``u`` a float64 uniform: off from exactly uniform by less than ``held / 2**53``), so
        that sampling never waits for the device once the buffer is known to hold rows.
        """
        if not self._known_filled:
            if len(self) == 0:
                raise ValueError("ReservoirBuffer.sample: the buffer is empty; add rows first")
            self._known_filled = True
        held = self._seen.clamp(max=self.capacity)
        uniforms = torch.rand(
            batch_size,
            generator=generator if generator is not None else self.generator,
            dtype=torch.float64,
            device=self.device,
        )
        index = (uniforms * held).long()  # [batch] uniform in [0, held)
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
        """Restore a :meth:`state_dict` taken from a buffer of the same shape; a ``None``
        generator state keeps this buffer's own stream (a rank a resume added)."""
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
        self._seen.fill_(state["n_seen"])
        self._known_filled = False
        if state["generator"] is not None:
            self.generator.set_state(state["generator"])
        if self.held_out is not None and state.get("held_out") is not None:
            self.held_out.load_state_dict(state["held_out"])
