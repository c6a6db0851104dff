"""The torch trace reader against torch's own numbers, and its streaming behaviour."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import pytest

torch = pytest.importorskip("torch")

from perfstack_plugins.torchprof.gunzip import TraceError  # noqa: E402
from perfstack_plugins.torchprof.rows import summarize  # noqa: E402
from perfstack_plugins.torchprof.trace import TraceAggregate, TraceReader  # noqa: E402

from perfstack.report import Layer  # noqa: E402


def _train(steps: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(8 * 16 * 16, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        _train(3)
    path = tmp_path_factory.mktemp("trace") / "trace.json"
    prof.export_chrome_trace(str(path))
    return path, {e.key: e for e in prof.key_averages()}


def _by_name(path):
    agg = TraceAggregate()
    agg.add_file(path)
    rows, _, _ = summarize(agg)
    per = defaultdict(lambda: {"calls": 0, "total": 0.0, "self": 0.0, "flops": 0})
    for row in rows[Layer.FRAMEWORK]:
        entry = per[row.attrs["op"]]
        entry["calls"] += row.values["calls"].value
        entry["total"] += row.values["total"].value * 1e6
        entry["self"] += row.values["self"].value * 1e6
        if "flops" in row.values:
            entry["flops"] += row.values["flops"].value
    return per, rows


def test_op_counts_equal_key_averages(profiled):
    path, expected = profiled
    ours, _ = _by_name(path)
    assert {name: e["calls"] for name, e in ours.items()} == {
        key: avg.count for key, avg in expected.items()}


def test_times_agree_with_key_averages_within_one_percent(profiled):
    path, expected = profiled
    ours, _ = _by_name(path)
    total_ours = sum(e["total"] for e in ours.values())
    total_torch = sum(a.cpu_time_total for a in expected.values())
    assert total_ours == pytest.approx(total_torch, rel=0.01)
    self_ours = sum(e["self"] for e in ours.values())
    self_torch = sum(a.self_cpu_time_total for a in expected.values())
    assert self_ours == pytest.approx(self_torch, rel=0.01)
    for name, avg in expected.items():
        if avg.cpu_time_total > 50:  # µs; tiny ops are within rounding of the trace's 3 decimals
            assert ours[name]["total"] == pytest.approx(avg.cpu_time_total, rel=0.01), name
            assert ours[name]["self"] == pytest.approx(avg.self_cpu_time_total, rel=0.01,
                                                       abs=1.0), name


def test_flops_equal_torch_counts(profiled):
    path, expected = profiled
    ours, _ = _by_name(path)
    counted = {key: avg.flops for key, avg in expected.items() if avg.flops}
    assert {"aten::conv2d", "aten::addmm"} <= set(counted)
    for name, value in counted.items():
        assert ours[name]["flops"] == value, name


def test_ops_carry_the_bytes_they_move_their_type_and_kind(profiled):
    """The linear layer's addmm (bias 10, input 4x2048, weight 2048x10, fp32) moves its
    inputs and its 4x10 output once a call; a composite op (linear) has no cost of its own;
    ops inside a costed op (the convolution under conv2d) are marked as counted there."""
    path, _ = profiled
    _, rows = _by_name(path)
    framework = {r.key: r for r in rows[Layer.FRAMEWORK]}
    (addmm,) = [r for r in framework.values() if r.attrs["op"] == "aten::addmm"]
    calls = addmm.values["calls"].value
    assert addmm.values["bytes"].value == calls * 4 * (10 + 4 * 2048 + 2048 * 10 + 4 * 10)
    assert addmm.attrs["dtype"] == "fp32" and addmm.attrs["op_kind"] == "matmul"
    linear = [r for r in framework.values() if r.attrs["op"] == "aten::linear"]
    assert linear and all("flops" not in r.values and "bytes" not in r.values for r in linear)
    inner = [r for r in framework.values() if r.attrs["op"] == "aten::convolution"]
    assert inner and all(r.attrs.get("cost_in_caller") for r in inner)


def test_cpu_kernel_rows_hold_native_time_linked_to_ops(profiled):
    path, _ = profiled
    _, rows = _by_name(path)
    kernels = {row.key: row for row in rows[Layer.KERNEL]}
    conv = kernels["aten::mkldnn_convolution"]
    assert conv.values["self"].value > 0
    assert any(key.startswith("aten::conv2d ") for key in conv.links["framework"])


def test_reader_streams_gzip_and_survives_truncation(tmp_path):
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "ts": i, "dur": 1, "tid": 1,
               "pid": 1, "args": {}} for i in range(3000)]
    text = json.dumps({"schemaVersion": 1, "traceEvents": events}, indent=2)
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    assert sum(1 for _ in TraceReader(gz)) == 3000
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    reader = TraceReader(cut)
    got = list(reader)
    assert reader.truncated and 1000 < len(got) < 2000
    bad = tmp_path / "bad.json"
    bad.write_text('{"foo": 1}')
    with pytest.raises(TraceError):
        list(TraceReader(bad))


def test_an_event_with_a_quote_in_its_name_is_read_not_taken_for_the_end(tmp_path):
    """Kineto writes names unescaped: a real trace (tests/fixtures/torch-traces) whose Python
    frame is named ``..."python_s"``. Every event is read, the rows after it included, and the
    notes say what was repaired, not that the trace was cut short."""
    from pathlib import Path

    recorded = Path(__file__).parent / "fixtures/torch-traces/quote_in_name.pt.trace.json.gz"
    reader = TraceReader(recorded)
    names = [e.name for e in reader]
    assert len(names) == 873 and reader.repaired == 1 and not reader.truncated
    assert 'torch/profiler/_cupti_monitor.py(0): "python_s"' in names
    agg = TraceAggregate()
    agg.add_file(recorded)
    rows, _, notes = summarize(agg)
    python = [r.key for r in rows[Layer.PYTHON]]
    assert any(k.startswith("compute (") and "torch_nostep.py:" in k for k in python), python
    assert not any("cut short" in n for n in notes)
    assert any("1 event(s) of the trace were invalid JSON" in n for n in notes), notes
    # The merged timeline keeps the trace too (it was empty: the whole file was refused).
    from tests.conftest import perfstack_in

    shown = perfstack_in(tmp_path, "analyze", str(recorded), "--format", "perfetto", "-o",
                         "r.json")
    assert shown.code == 0, shown.stderr
    timeline = [e.get("name") for e in json.loads(shown.stdout)["traceEvents"]]
    assert 'torch/profiler/_cupti_monitor.py(0): "python_s"' in timeline
    assert sum(1 for n in timeline if n == "aten::mm") == 3
    # The same fault on the fast path (a big file, read in batches), as the last event (read
    # one by one), and beside an event cut short at the end, which stays "cut short".
    event = '  {{\n    "ph": "X", "cat": "cpu_op",\n    "name": "{}",\n    "ts": {}, "dur": 1, ' \
        '"tid": 1, "pid": 1\n  }}'
    many = [event.format(f"aten::op{i}", i) for i in range(30_000)]
    many[20_000] = event.format('a "quoted" name', 20_000)
    many[-1] = event.format('the "last" one', 29_999)
    big = tmp_path / "big.json"
    big.write_text('{"traceEvents": [\n' + ",\n".join(many) + "\n]}")
    reader = TraceReader(big)
    got = [e.name for e in reader]
    assert len(got) == 30_000 and reader.repaired == 2 and not reader.truncated
    assert got[20_000] == 'a "quoted" name' and got[-1] == 'the "last" one'
    cut = tmp_path / "cut.json"
    cut.write_text('{"traceEvents": [\n' + ",\n".join(many[:10]) + ",\n" + many[10][:30])
    reader = TraceReader(cut)
    assert len(list(reader)) == 10 and reader.truncated


def test_the_profilers_closing_range_is_not_a_step() -> None:
    """torch opens a step range for the step in which the profiler stops: a last range of
    0.05 ms after steps of 260 ms is left out of the steps and their windows; a last step
    merely quicker, or one that ran ops, is kept."""
    from perfstack_plugins.torchprof.rows import closing_stub

    steps = [0.26, 0.25, 0.27, 0.00005]
    windows = [(0.0, 0.26), (0.3, 0.55), (0.6, 0.87), (0.9, 0.90005)]
    assert closing_stub(steps, windows) == 0.00005
    assert steps == [0.26, 0.25, 0.27] and windows[-1] == (0.6, 0.87)
    quick = [0.26, 0.25, 0.27, 0.05]
    assert closing_stub(quick, [(0, 1), (1, 2), (2, 3), (3, 4)]) is None and len(quick) == 4
    assert closing_stub([0.2, 0.00005], [(0, 1), (1, 2)]) is None  # too few to tell
    # A quick last range that ran ops is a step: on a loaded machine the first steps of a
    # tiny loop took 24 and 8 ms and its last real step 0.3 ms (a suite run dropped it as
    # the closing range); an empty one after it is the closing range.
    loaded = [0.0237, 0.0080, 0.0005, 0.0003]
    spans = [(0.0, 23.7), (24.0, 32.0), (32.5, 33.0), (33.2, 33.5)]
    assert closing_stub(loaded, spans, [1.0, 25.0, 32.6, 33.3]) is None and len(loaded) == 4
    stub = [*loaded, 0.0001]
    assert closing_stub(stub, [*spans, (33.6, 33.7)], [1.0, 25.0, 32.6, 33.3]) == 0.0001
    assert stub == loaded


@pytest.mark.parametrize("loader", [True, False])
def test_cpu_steps_split_into_data_loading_ops_and_the_rest(tmp_path, loader):
    """A CPU training loop, over a DataLoader or over tensors it slices itself: each step is
    its DataLoader range (when there is one: else no such phase), the ops under it, and the
    rest, adding up to the step."""
    from torch.profiler import ProfilerActivity, profile, schedule
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    x_all, y_all = torch.randn(64, 32), torch.randint(0, 4, (64,))
    batches = (DataLoader(TensorDataset(x_all, y_all), batch_size=8) if loader
               else [(x_all[i:i + 8], y_all[i:i + 8]) for i in range(0, 64, 8)])
    model = torch.nn.Linear(32, 4)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=4, repeat=1)) as prof:
        for x, y in batches:
            torch.nn.functional.cross_entropy(model(x), y).backward()
            prof.step()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    agg = TraceAggregate()
    agg.add_file(path)
    _, metrics, _ = summarize(agg)
    by = {m.name: m for m in metrics}
    steps = by["torch_step_time"].samples
    phases = ("data", "ops", "other") if loader else ("ops", "other")
    assert ("cpu_step.data" in by) is loader
    parts = [by[f"cpu_step.{p}"].samples for p in phases]
    assert len(steps) == 4 and all(len(p) == 4 for p in parts)
    for i, step in enumerate(steps):
        assert sum(p[i] for p in parts) == pytest.approx(step, abs=2e-6)
    assert all(v > 0 for p in parts[:2] for v in p)


def test_a_nan_or_infinite_time_is_that_event_s_problem(profiled, tmp_path):
    """One op of a real trace with "dur": NaN and one with "ts": Infinity (JSON that Python
    and torch write): the reader once failed whole ('records that do not fit the schema',
    no rows). The two events are left out and counted, the rest is read."""
    path, _ = profiled
    data = json.loads(path.read_text())
    ops = [e for e in data["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    ops[len(ops) // 2]["dur"] = float("nan")
    ops[len(ops) // 3]["ts"] = float("inf")
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text(json.dumps(data))  # NaN and Infinity, as json.dumps writes them
    agg = TraceAggregate()
    agg.add_file(bad)
    assert agg.nonfinite == 2
    rows, _metrics, notes = summarize(agg)
    assert rows[Layer.FRAMEWORK] and all(
        q.value is None or q.value == q.value for r in rows[Layer.FRAMEWORK]
        for q in r.values.values())
    assert any("2 event(s)" in n and "not a number" in n for n in notes)
