"""The bookkeeping shared by the small games' batches (Kuhn, Leduc, Liar's Dice): a batch's
state is a few tensors with the game first, so selecting, copying and moving a batch is the
same map over them, whatever the rules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Self

import torch

from lostcities_cfr.errors import ConfigError


def check_new_batch(game: str, batch_size: int, kernels: str) -> None:
    """Refuse what ``Game.new_batch`` of a small game cannot give: compiled kernels (its rules
    are a few small tensor operations, with nothing to fuse) or an empty batch."""
    if kernels == "compiled":
        raise ConfigError(
            f"{game} has no compiled kernels (its rules are a few small tensor "
            "operations); use kernels='eager'"
        )
    if kernels != "eager":
        raise ConfigError(f"kernels must be 'eager' or 'compiled', got {kernels!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")


class TensorBatch:
    """B games whose whole state is the tensors named in :attr:`FIELDS` ([B, ...] each; the
    first one's length is B, and ``_done`` [B] bool is among them). Subclasses hold the rules:
    ``legal_mask``, ``step``, ``encode``... of :class:`~lostcities_cfr.game.protocol.BatchedGames`.
    """

    FIELDS: ClassVar[tuple[str, ...]]

    def __init__(self, game: Any, **state: torch.Tensor) -> None:
        """Low-level: every tensor named in :attr:`FIELDS`, game first."""
        missing = set(self.FIELDS) - set(state)
        if missing:
            raise ValueError(f"{type(self).__name__} needs state tensors {sorted(missing)}")
        self.game = game
        for name in self.FIELDS:
            setattr(self, name, state[name])

    def _map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Self:
        return type(self)(self.game, **{n: fn(getattr(self, n)) for n in self.FIELDS})

    def select(self, index: torch.Tensor | Sequence[int]) -> Self:
        """A new batch of the games at ``index`` ([n] int64); repeats fork a game."""
        index = torch.as_tensor(index, dtype=torch.int64, device=self.device)
        return self._map(lambda v: v.index_select(0, index))

    def clone(self) -> Self:
        return self._map(torch.clone)

    def to(self, device: str | torch.device) -> Self:
        return self._map(lambda v: v.to(device))

    @property
    def batch_size(self) -> int:
        return len(getattr(self, self.FIELDS[0]))

    def __len__(self) -> int:
        return self.batch_size

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.game.name}, batch_size={self.batch_size}, "
            f"device={self.device}, done={int(self._done.sum())})"
        )

    @property
    def device(self) -> torch.device:
        return getattr(self, self.FIELDS[0]).device

    @property
    def compiled(self) -> bool:
        return False

    @property
    def done(self) -> torch.Tensor:
        """[B] bool: over by the rules, or cut short by a sampler (whose returns stay 0)."""
        return self._done

    @done.setter
    def done(self, done: torch.Tensor) -> None:
        self._done = torch.as_tensor(done, dtype=torch.bool, device=self.device)
