import pytest
import torch
from torch import nn
from torch._dynamo.utils import counters

from lostcities_cfr.errors import ConfigError
from lostcities_cfr.inference import InferenceQueue, QueueStats
from lostcities_cfr.inference import queue as queue_module

F, A = 10, 6


class RecordingNet(nn.Module):
    """A small MLP that records the batch size of every forward."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.layers = nn.Sequential(nn.Linear(F, 16), nn.ReLU(), nn.Linear(16, A))
        self.batch_sizes: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.batch_sizes.append(x.shape[0])
        return self.layers(x)


def masked_head(outputs: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    return outputs.masked_fill(~legal, -1.0)


def queries(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 4, (n, F), generator=g).float(), torch.rand(n, A, generator=g) < 0.5


def direct(net: nn.Module, features: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return masked_head(net.layers(features), legal)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 32, 33, 100])
def test_results_equal_direct_calls_whatever_the_padding(n):
    net = RecordingNet()
    queue = InferenceQueue(bucket_sizes=(8, 32), pad="always")
    queue.register("adv", net, masked_head)
    features, legal = queries(n)
    torch.testing.assert_close(queue("adv", features, legal), direct(net, features, legal))


def test_forwards_are_padded_to_the_smallest_bucket_and_split_by_the_largest():
    net = RecordingNet()
    queue = InferenceQueue(bucket_sizes=(8, 32), pad="always")
    queue.register("adv", net, masked_head)
    for n in (5, 8, 9, 70):
        queue(*("adv", *queries(n)))
    assert net.batch_sizes == [8, 8, 32, 32, 32, 8]
    assert queue.stats().padded_rows == 3 + 0 + 23 + 2


def test_without_buckets_a_forward_runs_exactly_the_rows_submitted():
    net = RecordingNet()
    queue = InferenceQueue(bucket_sizes=None)
    queue.register("adv", net, masked_head)
    queue("adv", *queries(70))
    assert net.batch_sizes == [70]


def test_submits_before_a_flush_share_one_forward_and_split_back():
    net = RecordingNet()
    queue = InferenceQueue(bucket_sizes=(64,), pad="always")
    queue.register("adv", net, masked_head)
    parts = [queries(n, seed=n) for n in (5, 0, 9, 3)]
    tickets = [queue.submit("adv", f, m) for f, m in parts]
    assert net.batch_sizes == []
    queue.flush()
    assert net.batch_sizes == [64]
    for ticket, (f, m) in zip(tickets, parts, strict=True):
        torch.testing.assert_close(ticket.result(), direct(net, f, m))
    assert tickets[1].result().shape == (0, A)


def test_a_ticket_result_flushes_the_queue_when_needed():
    net = RecordingNet()
    queue = InferenceQueue()
    queue.register("adv", net, masked_head)
    features, legal = queries(4)
    ticket = queue.submit("adv", features, legal)
    assert net.batch_sizes == []
    torch.testing.assert_close(ticket.result(), direct(net, features, legal))
    assert net.batch_sizes == [4]


def test_one_flush_runs_one_forward_per_network():
    nets = {"p0": RecordingNet(0), "p1": RecordingNet(1), "strategy": RecordingNet(2)}
    queue = InferenceQueue()
    for name, net in nets.items():
        queue.register(name, net, masked_head)
    tickets = {name: [queue.submit(name, *queries(n, seed=n)) for n in (3, 4)] for name in nets}
    queue.flush()
    for name, net in nets.items():
        assert net.batch_sizes == [3 + 4]
        for ticket, n in zip(tickets[name], (3, 4), strict=True):
            torch.testing.assert_close(ticket.result(), direct(net, *queries(n, seed=n)))
    assert queue.stats().calls == 3


def test_stats_count_forwards_rows_padding_and_time():
    queue = InferenceQueue(bucket_sizes=(8, 32), pad="always")
    queue.register("adv", RecordingNet(), masked_head)
    queue("adv", *queries(5))
    queue("adv", *queries(40))
    stats = queue.stats()
    assert (stats.calls, stats.rows, stats.padded_rows) == (3, 45, 3 + 0 + 0)
    assert stats.mean_batch == 15.0
    assert stats.policy_network_seconds > 0
    queue.reset_stats()
    assert queue.stats() == QueueStats()
    assert queue.stats().mean_batch == 0.0


def test_forwards_run_uncounted_leave_the_counters_as_they_were():
    queue = InferenceQueue(bucket_sizes=(8, 32), pad="always")
    queue.register("adv", RecordingNet(), masked_head)
    queue("adv", *queries(5))
    before = queue.stats()
    with queue.uncounted():
        queue("adv", *queries(40))
        assert queue.stats().rows == 45  # counted inside the block, as ever
    assert queue.stats() == before
    queue("adv", *queries(3))
    assert queue.stats().rows == 5 + 3


def test_snapshots_do_not_change_as_the_queue_runs():
    queue = InferenceQueue(bucket_sizes=None)
    queue.register("adv", RecordingNet(), masked_head)
    snapshot = queue.stats()
    queue("adv", *queries(5))
    assert snapshot.rows == 0 and queue.stats().rows == 5


def test_local_mode_runs_one_row_per_forward_with_equal_results():
    net = RecordingNet()
    batched, local = InferenceQueue(), InferenceQueue(local=True)
    for queue in (batched, local):
        queue.register("adv", net, masked_head)
    features, legal = queries(12)
    torch.testing.assert_close(local("adv", features, legal), batched("adv", features, legal))
    assert local.stats().calls == 12 and local.stats().mean_batch == 1.0


def test_default_head_returns_the_raw_outputs():
    net = RecordingNet()
    queue = InferenceQueue()
    queue.register("raw", net)
    features, legal = queries(5)
    with torch.no_grad():
        torch.testing.assert_close(queue("raw", features, legal), net.layers(features))


def test_a_bfloat16_network_gets_bfloat16_features_and_returns_float32():
    net = RecordingNet().to(torch.bfloat16)
    queue = InferenceQueue()
    queue.register("adv", net, masked_head)
    features, legal = queries(5)
    result = queue("adv", features, legal)
    assert result.dtype == torch.float32
    with torch.no_grad():
        expected = masked_head(net.layers(features.bfloat16()).float(), legal)
    torch.testing.assert_close(result, expected)


def test_unknown_network_names_the_registered_ones():
    queue = InferenceQueue()
    queue.register("adv_p0", RecordingNet())
    with pytest.raises(ConfigError, match="adv_p0"):
        queue.submit("adv_p1", *queries(2))


@pytest.mark.parametrize(
    "features, legal",
    [
        (torch.zeros(3, F), torch.zeros(4, A, dtype=torch.bool)),
        (torch.zeros(3, F), torch.zeros(3, A)),
        (torch.zeros(F), torch.zeros(1, A, dtype=torch.bool)),
    ],
)
def test_rows_of_mismatched_shape_or_a_non_bool_mask_are_refused(features, legal):
    queue = InferenceQueue()
    queue.register("adv", RecordingNet())
    with pytest.raises(ValueError, match="bool"):
        queue.submit("adv", features, legal)


@pytest.mark.parametrize("buckets", [(), (0, 8), (32, 8), (8, 8)])
def test_bucket_sizes_must_be_positive_and_increasing(buckets):
    with pytest.raises(ConfigError, match="bucket_sizes"):
        InferenceQueue(bucket_sizes=buckets)


def test_auto_padding_skips_eager_cpu_forwards_and_pads_compiled_ones():
    net = RecordingNet()
    queue = InferenceQueue(bucket_sizes=(8, 32), compile_backend="eager")
    queue.register("adv", net, masked_head)
    queue("adv", *queries(5))
    assert net.batch_sizes == [5]  # eager on a CPU: fixed shapes buy nothing
    queue.set_backend("compiled")
    queue("adv", *queries(5))
    assert queue.stats().padded_rows == 3  # compiled: one graph per bucket


def test_unknown_pad_mode_is_refused():
    with pytest.raises(ConfigError, match="pad='never'"):
        InferenceQueue(pad="never")


def test_unknown_backend_is_refused():
    with pytest.raises(ConfigError, match="eager"):
        InferenceQueue(backend="jit")


def check_compiled_backend_equals_eager(compile_backend: str) -> None:
    net = RecordingNet()
    keys = list(net.state_dict())
    queue = InferenceQueue(bucket_sizes=(16,), compile_backend=compile_backend)
    queue.register("adv", net, masked_head)
    features, legal = queries(20)
    eager = queue("adv", features, legal)
    queue.set_backend("compiled")
    compiled = queue("adv", features, legal)
    torch.testing.assert_close(compiled, eager)
    assert list(net.state_dict()) == keys
    # The compiled handle reads the module's parameters, so updates show.
    with torch.no_grad():
        net.layers[2].bias.add_(1.0)
    torch.testing.assert_close(queue("adv", features, legal), direct(net, features, legal))
    queue.set_backend("eager")
    torch.testing.assert_close(queue("adv", features, legal), direct(net, features, legal))


def test_compiled_backend_shares_the_registered_modules_parameters():
    # Dynamo tracing only: checks the handle without generating kernels.
    check_compiled_backend_equals_eager("eager")


def ignore_outputs(outputs: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    return legal.float()


def test_compiled_backend_compiles_each_bucket_once_whatever_rows_and_heads_it_is_given():
    torch._dynamo.reset()
    queue = InferenceQueue(bucket_sizes=(4, 8), backend="compiled", compile_backend="eager")
    net = RecordingNet()
    start = counters["stats"]["unique_graphs"]
    features, legal = queries(8)
    # Full buckets as given (row-major, or a transposed view of batch-last state as the
    # engine's encode returns) and padded ones; heads replaced as between CFR iterations,
    # and a second network of the same shape.
    batch_last = features.t().contiguous().t(), legal.t().contiguous().t()
    for name, head in (("adv", ignore_outputs), ("adv", masked_head), ("strategy", masked_head)):
        queue.register(name, RecordingNet().layers if name == "strategy" else net.layers, head)
        for rows, mask in ((features, legal), batch_last):
            for n in (4, 3, 8, 5):
                result = queue(name, rows[:n], mask[:n])
                if name == "adv" and head is masked_head:
                    torch.testing.assert_close(result, direct(net, features[:n], legal[:n]))
    assert counters["stats"]["unique_graphs"] - start == 2


@pytest.mark.slow
def test_inductor_compiled_backend_equals_eager():
    # About 30 s on two CPU cores the first time (generating C++ kernels); inductor
    # caches them on disk for later runs.
    check_compiled_backend_equals_eager("inductor")


class FakeDevice:
    """A stream on the host: it has done the work up to ``now`` (ms), in order."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.waits: list[float] = []

    def event(self, at: float) -> "FakeEvent":
        return FakeEvent(self, at)


class FakeEvent:
    """A timing event's interface: ``at`` is when the stream reaches it (ms)."""

    def __init__(self, device: FakeDevice, at: float) -> None:
        self.device, self.at = device, at

    def query(self) -> bool:
        return self.at <= self.device.now

    def synchronize(self) -> None:
        self.device.waits.append(self.at)
        self.device.now = max(self.device.now, self.at)

    def elapsed_time(self, end: "FakeEvent") -> float:
        assert self.query() and end.query(), "elapsed_time of an unfinished event raises"
        return end.at - self.at


def test_device_spans_add_event_times_and_wait_only_when_read(monkeypatch):
    monkeypatch.setattr(queue_module, "SETTLE_EVERY", 4)
    stream = FakeDevice(now=15)
    marks = iter(stream.event(t) for t in (0, 2, 10, 13, 20, 21, 30, 34))
    spans = queue_module.DeviceSpans(mark=lambda device: next(marks))
    cpu = torch.device("cpu")
    for _ in range(2):
        spans.close(spans.open(cpu), cpu)
    snapshot = spans.copy()
    spans.close(spans.open(cpu), cpu)  # 3 spans: below SETTLE_EVERY, nothing folds
    spans.close(spans.open(cpu), cpu)  # 4: the two finished ones fold, the others wait
    settled, pending = spans._state
    assert settled == pytest.approx(0.005) and len(pending) == 2 and stream.waits == []
    assert spans.seconds(wait=False) == pytest.approx(0.005)  # the finished spans only
    assert stream.waits == []
    assert spans.seconds() == pytest.approx((2 + 3 + 1 + 4) / 1000)
    assert stream.waits == [21, 34]  # each pending span's end
    assert snapshot.seconds() == pytest.approx(0.005)  # a copy keeps its own spans


def test_a_queue_on_the_host_times_forwards_by_the_clock_and_keeps_no_events():
    queue = InferenceQueue(bucket_sizes=None)
    queue.register("adv", RecordingNet(), masked_head)
    queue("adv", *queries(5))
    assert queue.stats().policy_network_seconds > 0
    assert queue._device_spans._state == (0.0, ())
