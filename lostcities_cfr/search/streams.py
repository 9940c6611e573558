"""Counter-based random numbers: each game draws from a stream of its own.

A ``torch.Generator`` hands out numbers in the order they are asked for, so what one game
of a batch draws depends on which other games share the call. Expert iteration labels the
decisions of many games in one batched search and wants a game's labels to be the same
whichever games it is searched with (``tests/baselines/test_expert_iteration.py`` holds
batched labelling equal to labelling one game at a time). Here a *stream* is an int64 key
per row; :func:`child` derives keys for sub-draws (a round of the search, an action, a
world, a rollout step) and :func:`unit` turns a key into a uniform float, so every number is
a pure function of its row's key and its place, computed for all rows at once.

The mixing function is SplitMix64's finaliser (Steele, Lea and Flood, "Fast Splittable
Pseudorandom Number Generators", OOPSLA 2014), on int64 tensors: multiplication wraps
modulo 2**64 as unsigned arithmetic would, and right shifts are made logical by masking.
"""

from __future__ import annotations

import torch

# SplitMix64's constants as signed int64 (the same 64 bits).
_GOLDEN = 0x9E3779B97F4A7C15 - 2**64
_M1 = 0xBF58476D1CE4E5B9 - 2**64
_M2 = 0x94D049BB133111EB - 2**64
_FLOAT_BITS = 24  # a float32 in [0, 1) holds 24 bits exactly


def _shift(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 ``x`` (torch's ``>>`` is arithmetic)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def mix(x: torch.Tensor) -> torch.Tensor:
    """SplitMix64 of int64 ``x``, elementwise: nearby keys give unrelated outputs."""
    x = x + _GOLDEN
    x = (x ^ _shift(x, 30)) * _M1
    x = (x ^ _shift(x, 27)) * _M2
    return x ^ _shift(x, 31)


def child(stream: torch.Tensor, index: int | torch.Tensor) -> torch.Tensor:
    """The key of draw ``index`` (an int, or int64 broadcasting with ``stream``) of each
    stream of ``stream`` (int64 [...]): itself a stream, for draws within that draw."""
    index = torch.as_tensor(index, dtype=torch.int64, device=stream.device)
    return mix(stream ^ mix(index))


def unit(key: torch.Tensor) -> torch.Tensor:
    """Uniform float32 in [0, 1) of each int64 key, from its top 24 bits."""
    return _shift(mix(key), 64 - _FLOAT_BITS).float() * 2.0**-_FLOAT_BITS


def uniforms(stream: torch.Tensor, count: int) -> torch.Tensor:
    """[n, count] float32: the first ``count`` uniforms of each of ``n`` streams ([n] int64)."""
    counters = torch.arange(count, device=stream.device)
    return unit(child(stream[:, None], counters[None, :]))


def streams_of(seed: int, rows: torch.Tensor) -> torch.Tensor:
    """[n] int64: the stream of each row id of ``rows`` ([n] int64) under ``seed``."""
    return child(torch.full_like(rows, seed), rows)
