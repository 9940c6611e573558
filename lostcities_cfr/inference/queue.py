"""One batched, in-process queue for every network query made outside training.

The walkers of a traversal are a tensor batch, so at each step the sampler
submits the queries of all of them (one :meth:`InferenceQueue.submit` per
network, or several) and one :meth:`InferenceQueue.flush` runs ONE forward per
network over every row submitted since the last flush: a network sees batches
of thousands of rows rather than one query per walker.

Each network is registered with a *head* ``head(outputs [n, A], legal [n, A]
bool) -> [n, A]`` that turns raw outputs into what the caller needs (regret
matching for an advantage network, a masked softmax for the strategy network,
or nothing). The queue knows nothing of CFR: the caller passes the head.

Shapes are kept stable where that pays: rows are padded up to the smallest of
a few bucket sizes (rows beyond the largest bucket run as largest-bucket
chunks), so a compiled module (``torch.compile``, CUDA graphs) sees at most one
shape per bucket. Padding rows are zero features with no legal action, cut off
before results are returned; as modules and heads treat rows independently (an
MLP and a per-row head do), padding never changes a result. An eager forward on
a CPU gains nothing from fixed shapes and pays for every padding row (about a
third more rows at the batch sizes of a classic traversal), so by default
(``pad="auto"``) the queue pads only for the compiled backend or a CUDA device;
``pad="always"`` pads every forward, ``bucket_sizes=None`` none.

Backends: ``"eager"`` calls the registered module; ``"compiled"`` calls a
``torch.compile`` handle built over the same module, sharing its parameters, so
the module, its ``state_dict`` keys and checkpoints stay the same whichever
backend runs; :meth:`InferenceQueue.set_backend` switches at run time and
compiled handles are kept for switching back. The heads run eagerly after the
compiled forward: one graph per bucket size then serves every head and every
network of the same shape (a new head at iteration 2 compiles nothing, and
dynamo's eight graphs per function are not spent on heads), and a head that
ignores the outputs (CFR's first, uniform iteration) cannot let the compiler
drop the network's forward. A head is a few elementwise operations on [n, A].

``local=True`` runs every row as a batch of one, as a per-walker server would;
it exists to measure what batching buys.

Every forward runs under ``torch.inference_mode``: results are inference
tensors (clone one before changing it in place outside inference mode). A
network's rows run on the device of its module's parameters; each ticket's
result comes back on the device its features were submitted from. The queue is
meant for one thread.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from lostcities_cfr.arguments import PositiveInt, checked
from lostcities_cfr.errors import ConfigError

Head = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Backend = Literal["eager", "compiled"]
SETTLE_EVERY = 256  # DeviceSpans folds its finished spans when it holds this many


def raw_outputs(outputs: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """The head that returns the network's outputs unchanged."""
    return outputs


class _FloatOutputs(nn.Module):
    """``module(features).float()``: the part of a query that the compiled backend compiles.

    Outputs are cast to float32, so a bfloat16 network's strategies are still
    normalised in float32.
    """

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.module(features).float()


class HeadedModule(nn.Module):
    """``head(module(features).float(), legal)``: one network query as a single module.

    Holds the registered module as a submodule (no parameters of its own), so the
    registered module stays as it is.
    """

    def __init__(self, module: nn.Module, head: Head) -> None:
        super().__init__()
        self.outputs = _FloatOutputs(module)
        self.head = head

    def forward(self, features: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        return self.head(self.outputs(features), legal)


class Ticket:
    """A claim on the result of one :meth:`InferenceQueue.submit`."""

    def __init__(self, queue: InferenceQueue, n_rows: int, device: torch.device) -> None:
        self._queue = queue
        self.n_rows = n_rows
        self.device = device
        self._result: torch.Tensor | None = None

    def result(self) -> torch.Tensor:
        """The head's output [n, A] for the submitted rows; flushes the queue if needed."""
        if self._result is None:
            self._queue.flush()
        return self._result


@dataclass(frozen=True)
class QueueStats:
    """What the queue has run since its counters were last reset: a snapshot.

    Args:
        calls: forwards run (a flush runs one per network with rows, or more in chunks).
        rows: real rows run.
        padded_rows: padding rows run (zero rows added to reach a bucket size).
        policy_network_seconds: wall time inside :meth:`InferenceQueue.flush`'s forwards
            (on a CUDA device the device's time between events around them).
    """

    calls: int = 0
    rows: int = 0
    padded_rows: int = 0
    policy_network_seconds: float = 0.0

    @property
    def mean_batch(self) -> float:
        """Real rows per forward."""
        return self.rows / self.calls if self.calls else 0.0


@dataclass
class _Network:
    eager: HeadedModule
    compiled: nn.Module | None = None  # its forward, compiled on first use of the backend
    pending: list[tuple[torch.Tensor, torch.Tensor, Ticket]] = field(default_factory=list)


class InferenceQueue:
    """Batches the queries of many walkers into one forward per network.

    Args:
        bucket_sizes: batch sizes a forward is padded up to, increasing; None
            runs exactly the rows submitted, unpadded and unsplit.
        backend: ``"eager"`` or ``"compiled"`` (see the module docstring).
        local: run each row as its own batch of one (a baseline to measure
            against; ignores ``bucket_sizes``).
        pad: ``"auto"`` pads to ``bucket_sizes`` only for the compiled
            backend or a network on a CUDA device; ``"always"`` pads every
            forward (see the module docstring).
        compile_mode: ``mode`` passed to ``torch.compile`` (e.g.
            ``"reduce-overhead"`` for CUDA graphs); None for its default.
        compile_backend: ``backend`` passed to ``torch.compile``:
            ``"inductor"`` generates kernels; ``"eager"`` only traces (quick,
            for checking a setup).
    """

    @checked
    def __init__(
        self,
        bucket_sizes: Sequence[PositiveInt] | None = (64, 256, 1024, 4096),
        backend: Backend = "eager",
        local: bool = False,
        compile_mode: str | None = None,
        compile_backend: str = "inductor",
        pad: Literal["auto", "always"] = "auto",
    ) -> None:
        if bucket_sizes is not None:
            bucket_sizes = tuple(bucket_sizes)
            if not bucket_sizes or list(bucket_sizes) != sorted(set(bucket_sizes)):
                raise ConfigError(
                    f"InferenceQueue bucket_sizes={bucket_sizes}; expected strictly increasing "
                    "sizes such as (64, 256, 1024, 4096), or None for no padding"
                )
        self.bucket_sizes = bucket_sizes
        self.local = local
        self.pad = pad
        self.compile_mode = compile_mode
        self.compile_backend = compile_backend
        self._networks: dict[str, _Network] = {}
        self.set_backend(backend)
        self.reset_stats()

    @property
    def names(self) -> list[str]:
        """Names of the registered networks."""
        return list(self._networks)

    @checked
    def set_backend(self, backend: Backend) -> None:
        """Switch between ``"eager"`` and ``"compiled"``; takes effect at the next flush."""
        self.backend = backend

    def register(self, name: str, module: nn.Module, head: Head | None = None) -> None:
        """Make ``module`` queryable as ``name``; ``head`` defaults to :func:`raw_outputs`.

        Registering a name again replaces its network (rows already submitted
        under it run on the new one).
        """
        pending = self._networks[name].pending if name in self._networks else []
        self._networks[name] = _Network(HeadedModule(module, head or raw_outputs), pending=pending)

    def submit(self, name: str, features: torch.Tensor, legal: torch.Tensor) -> Ticket:
        """Queue rows features [n, F] with legal [n, A] bool for network ``name``."""
        if name not in self._networks:
            raise ConfigError(
                f"InferenceQueue has no network {name!r}; registered: {self.names} "
                "(call register first)"
            )
        if (
            features.ndim != 2
            or legal.ndim != 2
            or legal.shape[0] != features.shape[0]
            or legal.dtype != torch.bool
        ):
            raise ValueError(
                f"InferenceQueue.submit: features {tuple(features.shape)} and legal "
                f"{tuple(legal.shape)} {legal.dtype} must be [n, F] and [n, A] bool, same n"
            )
        ticket = Ticket(self, features.shape[0], features.device)
        if features.shape[0] == 0:
            ticket._result = torch.zeros(0, legal.shape[1], device=features.device)
        else:
            self._networks[name].pending.append((features, legal, ticket))
        return ticket

    def __call__(self, name: str, features: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
        """Submit, flush and return the result in one call."""
        ticket = self.submit(name, features, legal)
        self.flush()
        return ticket.result()

    @torch.inference_mode()
    def flush(self) -> None:
        """Run one forward per network over all rows pending for it; fill their tickets."""
        for network in self._networks.values():
            if network.pending:
                self._run(network)

    def _run(self, network: _Network) -> None:
        start_time = time.perf_counter()
        # Read at every flush: the module may have moved or changed dtype since
        # it was registered (a bfloat16 network takes bfloat16 features).
        parameter = next(network.eager.parameters(), None)
        device = parameter.device if parameter is not None else torch.device("cpu")
        dtype = parameter.dtype if parameter is not None else torch.float32
        span = self._device_spans.open(device) if device.type == "cuda" else None
        pending, network.pending = network.pending, []
        features = _joined([_moved(f, device, dtype) for f, _, _ in pending])  # [n, F]
        legal = _joined([_moved(m, device) for _, m, _ in pending])  # [n, A]
        forward = self._forward_fn(network)
        outputs = []
        padded = self.pad == "always" or self.backend == "compiled" or device.type == "cuda"
        n = features.shape[0]
        chunks = list(self._chunks(n, padded))
        for start, stop, size in chunks:
            pad = size - (stop - start)
            x, m = features[start:stop], legal[start:stop]
            if padded:
                # Padding rows are all-zero features with no legal action. A full bucket is
                # copied too: a compiled forward guards on its inputs' strides and on whether
                # they are inference tensors, and a caller's rows (often a transposed view of
                # the engine's batch-last state) differ from a copy made here on both, so each
                # bucket would compile two or three times, which soon exhausts dynamo's
                # recompile limit and leaves the rest of the run eager.
                x = torch.cat([x, x.new_zeros(pad, x.shape[1])])
                m = torch.cat([m, m.new_zeros(pad, m.shape[1])])
            outputs.append(forward(x, m)[: stop - start])
        result = _joined(outputs)
        for part, (_, _, ticket) in zip(
            result.split([t.n_rows for _, _, t in pending]), pending, strict=True
        ):
            ticket._result = _moved(part, ticket.device)
        if span is not None:
            # Kernels run asynchronously, so wall time here would be launch time only, and
            # waiting for them would stall the walk at every flush: CUDA events time them.
            self._device_spans.close(span, device)
            seconds = 0.0
        else:
            seconds = time.perf_counter() - start_time
        stats = self._stats
        self._stats = QueueStats(
            calls=stats.calls + len(chunks),
            rows=stats.rows + n,
            padded_rows=stats.padded_rows + sum(size for *_, size in chunks) - n,
            policy_network_seconds=stats.policy_network_seconds + seconds,
        )

    def _forward_fn(self, network: _Network) -> Head:
        """``(features, legal) -> head output`` of the backend in use."""
        if self.backend == "eager":
            return network.eager
        if network.compiled is None:
            network.compiled = torch.compile(
                network.eager.outputs,
                # Fixed shapes: one graph per bucket. Without buckets every
                # size is new, so let dynamo generalise instead.
                dynamic=False if self.local or self.bucket_sizes is not None else None,
                mode=self.compile_mode,
                backend=self.compile_backend,
            )
        compiled, head = network.compiled, network.eager.head
        return lambda features, legal: head(compiled(features), legal)

    def _chunks(self, n: int, padded: bool) -> Iterator[tuple[int, int, int]]:
        """(start, stop, padded size) of each forward over n rows."""
        if self.local:
            yield from ((i, i + 1, 1) for i in range(n))
        elif self.bucket_sizes is None or not padded:
            yield 0, n, n
        else:
            largest = self.bucket_sizes[-1]
            for start in range(0, n, largest):
                stop = min(start + largest, n)
                yield start, stop, next(b for b in self.bucket_sizes if b >= stop - start)

    def reset_stats(self) -> None:
        """Zero the counters."""
        self._stats = QueueStats()
        self._device_spans = DeviceSpans()

    def stats(self, wait: bool = True) -> QueueStats:
        """What the queue has run since the last :meth:`reset_stats` (a snapshot; safe to
        read from another thread, such as a progress display's). Forwards on a CUDA device
        are timed by events: reading their seconds waits for the device to run them, or,
        with ``wait=False`` (a display that reads the counts), counts only those it has."""
        stats = self._stats
        device_seconds = self._device_spans.seconds(wait)
        if not device_seconds:
            return stats
        total = stats.policy_network_seconds + device_seconds
        return dataclasses.replace(stats, policy_network_seconds=total)

    @contextmanager
    def uncounted(self) -> Iterator[None]:
        """Forwards run inside this block leave the counters as they were (a compile
        warm-up, a probe): :meth:`stats` afterwards is what it was before the block."""
        before, spans = self._stats, self._device_spans.copy()
        try:
            yield
        finally:
            self._stats, self._device_spans = before, spans


class DeviceSpans:
    """The seconds of CUDA work between pairs of events, read without a wait per pair.

    A span's end is recorded on the device's stream after its kernels are queued; its time
    is known once the device reaches it, so only :meth:`seconds` waits, and every
    :data:`SETTLE_EVERY` spans the finished ones are folded into a sum (a long run keeps no
    growing list of events). ``mark(device)`` returns an event recorded on
    the device's current stream (:func:`cuda_mark`; a test passes its own).
    """

    def __init__(self, mark: Callable[[torch.device], torch.cuda.Event] | None = None) -> None:
        self._mark = mark or cuda_mark
        # (seconds of the spans already folded, the spans not yet folded), replaced whole
        # so that a reader on another thread sees one consistent pair.
        self._state: tuple[float, tuple[tuple[torch.cuda.Event, torch.cuda.Event], ...]] = (
            0.0,
            (),
        )

    def open(self, device: torch.device) -> torch.cuda.Event:
        """Mark a span's start on ``device``."""
        return self._mark(device)

    def close(self, start: torch.cuda.Event, device: torch.device) -> None:
        """Mark the end of the span begun by ``start``."""
        settled, spans = self._state
        spans += ((start, self._mark(device)),)
        if len(spans) >= SETTLE_EVERY:  # fold the finished ones
            seconds, done = _elapsed(spans, wait=False)
            settled, spans = settled + seconds, spans[done:]
        self._state = settled, spans

    def seconds(self, wait: bool = True) -> float:
        """Every span's seconds, waiting for each to finish; with ``wait=False`` only those
        finished already (the first unfinished span and those after it are left out)."""
        settled, spans = self._state
        return settled + _elapsed(spans, wait)[0]

    def copy(self) -> DeviceSpans:
        twin = DeviceSpans(self._mark)
        twin._state = self._state
        return twin


def _elapsed(
    spans: Sequence[tuple[torch.cuda.Event, torch.cuda.Event]], wait: bool
) -> tuple[float, int]:
    """(seconds, how many spans) of ``spans`` from the first on: all of them, waiting for
    each to finish (they may lie on several streams or devices), or without ``wait`` up to
    the first one not finished."""
    total, counted = 0.0, 0
    for start, end in spans:
        if wait:
            end.synchronize()
        elif not end.query():
            break
        total += start.elapsed_time(end)
        counted += 1
    return total / 1000, counted


def _moved(
    tensor: torch.Tensor, device: torch.device, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """``tensor.to(device, dtype)``, without the call where it would change nothing (a
    ``to`` that returns its tensor is still an operator call, several per flush)."""
    if tensor.device == device and (dtype is None or tensor.dtype == dtype):
        return tensor
    return tensor.to(device, dtype)


def _joined(tensors: list[torch.Tensor]) -> torch.Tensor:
    """``torch.cat`` along rows, without the copy when there is a single tensor.

    The common step submits one block per network; its features are often a
    transposed view of the engine's batch-last [F, B] tensor, which the first
    Linear reads as it is (BLAS takes the transpose as a flag).
    """
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors)


def cuda_mark(device: torch.device) -> torch.cuda.Event:
    """A timing event recorded on ``device``'s current stream."""
    event = torch.cuda.Event(enable_timing=True)
    event.record(torch.cuda.current_stream(device))
    return event
