"""A job's ranks folded as they arrive (issue 56): the same rows whatever the order the ranks
come in, the same rows as the merge of every rank's rows, and a reader that never holds more
than a few ranks' rows."""

from __future__ import annotations

import copy
import random
import statistics
from pathlib import Path
from typing import Any

from perfstack.plugin.backend import Collected, Recorded
from perfstack.plugin.load import load_plugins
from perfstack.report import Layer, Quantity, Report, Row, RunInfo
from perfstack.report.job.rankfold import RowFold
from perfstack.report.job.rankrows import MANY_RANKS, merge_across_ranks
from perfstack.run.recorded.fold import JobFold, declared_primary
from perfstack.run.recorded.reduce import Unit, UnitResult


def _rows(rank: int, rng: random.Random) -> list[Row]:
    """One rank's rows: keys most ranks share, values that differ, some unknown with why."""
    rows = []
    for k in rng.sample(range(30), rng.randint(5, 25)):
        values = {}
        for name in rng.sample(["self", "total", "count"], rng.randint(1, 3)):
            v = rng.choice([None, rng.random() * 10 ** rng.randint(-6, 3), rng.randint(0, 5)])
            values[name] = Quantity(v, "count" if name == "count" else "s",
                                    None if v is not None else f"not on rank {rank}")
        links = {"python": [f"rank{rank}:f{rng.randint(0, 9)}"]} if rng.random() < 0.5 else {}
        rows.append(Row(f"rank{rank}:op{k}", f"[rank {rank}] op{k}", "torch", values,
                        {"rank": rank, "op": f"op{k}"}, links))
    return rows


def _as_dicts(rows: list[Row]) -> list[dict[str, Any]]:
    return [row.to_dict() for row in rows]


def test_the_fold_is_the_merge_whatever_the_order_of_the_ranks() -> None:
    """Ranks folded one by one in any order, or in two halves folded apart and then merged
    (as workers would), give the same rows, exactly; and those are the rows the report's
    merge across ranks gives, each value the mean per rank of the ranks that measured it."""
    rng = random.Random(56)
    ranks = {rank: _rows(rank, rng) for rank in rng.sample(range(100), 20)}
    orders = [sorted(ranks), sorted(ranks, reverse=True), rng.sample(sorted(ranks), 20)]
    place = {rank: i for i, rank in enumerate(sorted(ranks))}  # the rows' order in a report
    results = []
    for order in orders:
        fold = RowFold()
        for rank in order:
            for i, row in enumerate(copy.deepcopy(ranks[rank])):
                fold.add(Layer.FRAMEWORK, row, rank, (place[rank], i))
        results.append(_as_dicts([row for _, row in fold.rows()[Layer.FRAMEWORK]]))
    halves = [RowFold(), RowFold()]
    for n, rank in enumerate(orders[2]):
        for i, row in enumerate(copy.deepcopy(ranks[rank])):
            halves[n % 2].add(Layer.FRAMEWORK, row, rank, (place[rank], i))
    halves[1].merge(halves[0])
    results.append(_as_dicts([row for _, row in halves[1].rows()[Layer.FRAMEWORK]]))
    assert all(r == results[0] for r in results[1:])

    report = Report(run=RunInfo(command=[], cwd="/", started="", duration_s=0.0,
                                perfstack_version="0", repeat=1, warmup=0, timeout_s=None,
                                complete=True, runs=[]), environment={}, backends=[])
    report.layers[Layer.FRAMEWORK] = [row for rank in sorted(ranks)
                                      for row in copy.deepcopy(ranks[rank])]
    merged_away = merge_across_ranks(report)
    assert _as_dicts(report.layers[Layer.FRAMEWORK]) == results[0]
    assert merged_away == sum(map(len, ranks.values())) - len(results[0])
    # A value by hand: op k's "self" over the ranks that measured it.
    row = results[0][0]
    key = row["key"]
    measured = [(r.values["self"].value, rank) for rank, rows in ranks.items() for r in rows
                if r.key == f"rank{rank}:{key}" and "self" in r.values
                and r.values["self"].value is not None]
    if measured:
        mean = statistics.fmean(float(v) for v, _ in measured)
        assert abs(row["values"]["self"]["value"] - mean) <= 1e-12 * abs(mean)
        spread = row["attrs"]["across_ranks"]["self"]
        assert (spread["min"], spread["min_rank"]) == min(measured)
        assert (spread["max"], spread["max_rank"]) == max(measured)
    assert row["attrs"]["ranks"] == sum(any(r.key == f"rank{rank}:{key}" for r in rows)
                                        for rank, rows in ranks.items())


def test_1024_ranks_fold_holding_no_rank_s_rows() -> None:
    """1,024 ranks through the job's fold as a reader gets them: what is kept of each unit
    holds no records, no rank's rows are held once the job has MANY_RANKS ranks (before, at
    most that many are), and the job's rows are one per key, the ranks counted."""
    backends = load_plugins().backends()[0]
    fold = JobFold(declared_primary(backends))
    rng = random.Random(1024)
    most_held = 0
    order = rng.sample(range(1024), 1024)  # the ranks' files in any order
    for index, rank in enumerate(order):
        rows = [Row(f"op{k}", f"op{k}", "torch",
                    {"self": Quantity(rng.random() * 1e-3, "s")}, {"op": f"op{k}"})
                for k in range(40)]
        record = Recorded(Collected(rows={Layer.FRAMEWORK: rows}), [Path(f"rank-{rank}.json")],
                          rank=rank, world=1024)
        kept = fold.add(index, UnitResult(Unit("torch", (Path(f"rank-{rank}.json"),)),
                                          records=[record]))
        assert kept.records == [] and kept.error is None
        held = sum(1 for state in fold.backends.values() for r in state.records
                   if any(r.recorded.collected.rows.values()))
        most_held = max(most_held, held)
    assert most_held < MANY_RANKS
    job = fold.finish()
    [rows] = job.collected["torch"].rows.values()
    assert len(rows) == 40 and all(row.attrs["ranks"] == 1024 for row in rows)
    assert job.rows_across_ranks == {"ranks": 1024, "merged_away": 1024 * 40 - 40}
    assert job.world == 1024 and job.ranks["torch"] == order  # in the units' order


def _unit_results(count: int, seed: int) -> list[UnitResult]:
    """``count`` ranks' records as a reader gives them, their rows differing by rank."""
    rng = random.Random(seed)
    out = []
    for rank in range(count):
        record = Recorded(Collected(rows={Layer.FRAMEWORK: [
            Row(f"op{k}", f"op{k}", "torch", {"self": Quantity(rng.random() * 1e-3, "s")},
                {"op": "all_reduce" if k == 0 else f"op{k}"})
            for k in rng.sample(range(12), 8)]}), [Path(f"rank-{rank}.json")], rank=rank)
        out.append(UnitResult(Unit("torch", (Path(f"rank-{rank}.json"),)), records=[record]))
    return out


def _finished(fold: JobFold) -> tuple[Any, ...]:
    job = fold.finish()
    rows = {name: _as_dicts([r for rows in c.rows.values() for r in rows])
            for name, c in job.collected.items()}
    return rows, job.ranks, job.shares, job.rows_across_ranks


def test_folds_of_workers_merge_into_the_fold_of_one_reader() -> None:
    """Twelve ranks read on three workers, four each (fewer than MANY_RANKS a worker: each
    holds its ranks' rows), their folds merged in any order: the job as one reader folds it,
    rows, ranks, collective shares and counts alike; five ranks stay one row per rank."""
    declared = declared_primary(load_plugins().backends()[0])
    for count in (12, 5):
        one = JobFold(declared)
        for i, result in enumerate(copy.deepcopy(_unit_results(count, count))):
            one.add(i, result)
        want = _finished(one)
        for order in ([0, 1, 2], [2, 0, 1]):
            parts = [JobFold(declared) for _ in range(3)]
            for i, result in enumerate(copy.deepcopy(_unit_results(count, count))):
                parts[i % 3].add(i, result)
            job = JobFold(declared)
            for n in order:
                job.merge(parts[n])
            assert _finished(job) == want, (count, order)
        rows = want[0]["torch"]
        assert len(rows) == (12 if count == 12 else 8 * count), len(rows)
        assert (want[3] is not None) == (count >= MANY_RANKS)
        assert want[2][0] == "torch" and sorted(want[2][1]) == list(range(count))


def test_small_ranks_go_in_batches_and_big_ones_alone(tmp_path: Path) -> None:
    """Many small ranks are read 32 to a batch (one message each, not one a rank), a
    worker's share in at least four, the last batches smaller (a share of what is left, down
    to a quarter of the first: the workers end together); a rank of many MiB of JSON is a
    batch of its own; with no fold every unit comes back alone."""
    from perfstack.run.recorded.reduce import BATCH_BYTES, batches

    small = tmp_path / "small.json"
    small.write_bytes(b" " * 1000)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (BATCH_BYTES + 1))
    many = [(i, Unit("torch", (small,))) for i in range(1024)]
    cut = batches(many, 2, folded=True)
    assert [len(b) for b in cut] == [32] * 25 + [28, 25, 22, 19, 17, 15, 13, 11, 10] + [8] * 8
    assert [i for b in cut for i, _ in b] == list(range(1024))
    assert [len(b) for b in batches(many[:40], 2, folded=True)] == [5, 5, 4, 4, 3, 3] + [2] * 4 \
        + [1] * 8
    mixed = [(0, Unit("torch", (big,))), *many[1:3], (3, Unit("torch", (big,))), *many[4:40]]
    assert [len(b) for b in batches(mixed, 1, folded=True)] == [1, 2, 1, 9, 7, 5, 4, 3] + [2] * 4
    assert [len(b) for b in batches(many[:64], 1, folded=True)] == [16, 12, 9, 7, 5, 4, 4, 4, 3]
    assert all(len(b) == 1 for b in batches(many, 2, folded=False))


def test_what_ranks_repeat_is_held_once() -> None:
    """Each rank's copy of the same facts (device properties) and metric texts, read on
    workers and pickled back, is dropped for the first equal one: the parent holds one; the
    report's JSON is what it was."""
    import pickle

    from perfstack.report import Better, Metric

    facts = {"devices": ["GPU"] * 4, "device_properties": [{"name": "GPU", "numSms": 104}] * 4}
    results = _unit_results(6, 6)
    for result in results:
        assert result.records
        record = result.records[0]
        record.environment = copy.deepcopy(facts)
        record.collected.metrics = [Metric("gpu_busy", 50.0 + (record.rank or 0), "%", "kernel",
                                           "torch", Better.HIGHER,
                                           description="".join(["the share ", "of steps"]))]
    workers = [JobFold({}), JobFold({})]
    for i, result in enumerate(results):
        workers[i % 2].add(i, pickle.loads(pickle.dumps(result)))
    job = JobFold({})
    for worker in workers:
        job.merge(pickle.loads(pickle.dumps(worker)))
    done = job.finish()
    held = [done.recorded[f"rank{r}"]["device_properties"] for r in range(6)]
    assert all(h is held[0] for h in held) and held[0] == facts["device_properties"]
    descriptions = [m.description for c in done.collected.values() for m in c.metrics]
    assert len(descriptions) == 6 and all(d is descriptions[0] for d in descriptions)
    assert sorted(m.value for c in done.collected.values() for m in c.metrics) == [
        50.0 + r for r in range(6)]
