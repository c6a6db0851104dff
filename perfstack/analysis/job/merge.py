"""``perfstack merge``: the per-node reports of one multi-node job joined into one report.

Each node's ``perfstack run --nproc-per-node`` sees only its own ranks (their global numbers,
from torchrun's ``RANK``). Joined, every rank's rows and ``[rankN]`` metrics sit side by side,
and the cross-rank figures (slowest rank, straggler gap, collective wait, the job's
``gpu_busy``) are computed again over all of them. Figures of a node as a whole (its wall
time, its findings) keep the first node's name and get ``[nodeI]`` for the others.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from perfstack.analysis.job.distributed import rank_figures
from perfstack.records import replace
from perfstack.report import Layer, Report, order_findings
from perfstack.report.job.rankrows import merge_across_ranks

#: Figures computed across ranks: dropped from the inputs and computed again.
CROSS_RANK = re.compile(r"^(slowest_rank|straggler_gap|collective_wait\[rank\d+\]|"
                        r"collective_stall(\[rank\d+\])?|collective_transfer|"
                        r"communication_share\[rank\d+\]|gpu_busy)$")
CROSS_RANK_RULES = ("dist.straggler", "dist.imbalance")
_RANKED = re.compile(r"\[rank(\d+)\]$")


def _one_rank(report: Report) -> int | None:
    """The rank of a report of one rank whose metrics do not say it (``perfstack analyze`` of
    one rank's trace: its rows carry the rank), or None."""
    if any(_RANKED.search(m.name) for m in report.metrics):
        return None
    ranks = {row.attrs.get("rank") for rows in report.layers.values() for row in rows}
    ranks.discard(None)
    if len(ranks) != 1:
        return None
    rank = next(iter(ranks))
    return rank if isinstance(rank, int) else None


def unmergeable(reports: Sequence[Report], names: Sequence[str],
                force: bool = False) -> str | None:
    """Return why these reports are not the nodes of one job, or None: one report given twice
    (its ranks would count twice), or, unless ``force``, reports of different workloads
    (another script or other arguments), of different jobs (the same global rank twice, or
    another job id) or of different steps (``--steps`` and ``--warmup-steps``): a job's
    step times are matched across ranks by step number, and the i-th step time of each node
    must be the same step of the job."""
    from perfstack.analysis.diff.lead import workload_identity

    seen: dict[str, str] = {}
    for name, report in zip(names, reports, strict=True):
        key = repr((report.run.started, report.run.cwd, report.run.command,
                    [m.to_dict() for m in report.metrics]))
        if key in seen:
            return (f"{seen[key]} and {name} are the same report: its ranks would count twice")
        seen[key] = name
    if force:
        return None
    why = _not_one_job(reports, names)
    if why is not None:
        return why
    first = workload_identity(reports[0])
    for name, report in zip(names[1:], reports[1:], strict=True):
        other = workload_identity(report)
        if other != first:
            return (f"{names[0]} and {name} profile different workloads "
                    f"({' '.join([first[0], *first[1]])} vs {' '.join([other[0], *other[1]])}); "
                    "--force joins them anyway")
    window = _window(reports[0])
    for name, report in zip(names[1:], reports[1:], strict=True):
        if _window(report) != window:
            return (f"{names[0]} and {name} measured different steps ({window} vs "
                    f"{_window(report)}): their step times cannot be matched by step number; "
                    "run every node with the same --steps and --warmup-steps (--force joins "
                    "them anyway)")
    return None


def ranks_of(report: Report) -> set[int]:
    """The global ranks a node's report holds: its profiled ranks, its ``[rankN]`` metrics
    and its rows' ranks."""
    ranks = {r for r in _listed(_distributed(report).get("profiled_ranks"))
             if isinstance(r, int)}
    ranks |= {int(m[1]) for m in (_RANKED.search(x.name) for x in report.metrics) if m}
    ranks |= {row.attrs["rank"] for rows in report.layers.values() for row in rows
              if isinstance(row.attrs.get("rank"), int)}
    return ranks


def _mapping(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _listed(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _distributed(report: Report) -> dict[str, object]:
    """The environment's ``distributed`` record (a report's, so a dict only if it is one)."""
    return _mapping(report.environment.get("distributed"))


def _not_one_job(reports: Sequence[Report], names: Sequence[str]) -> str | None:
    """Why these reports cannot be the nodes of one job, or None: two of them hold the same
    global rank (node 0 of two jobs, run again with the same arguments), or they say they
    belong to different jobs (SLURM's job id, torchrun's rendezvous)."""
    held: dict[int, str] = {}
    for name, report in zip(names, reports, strict=True):
        for rank in sorted(ranks_of(report)):
            if rank in held:
                return (f"{held[rank]} and {name} both hold rank {rank}: they are not two "
                        "nodes of one job (node 0 of two jobs?); --force joins them anyway")
            held[rank] = name
    jobs = [(name, {k: v for k, v in _mapping(_distributed(report).get("job")).items()
                    if isinstance(v, str)})
            for name, report in zip(names, reports, strict=True)]
    for i, (first, mine) in enumerate(jobs):
        for other, theirs in jobs[i + 1:]:
            for key in sorted(set(mine) & set(theirs)):  # what both say
                if mine[key] != theirs[key]:
                    return (f"{first} and {other} are nodes of different jobs ({key} "
                            f"{mine[key]} vs {theirs[key]}); --force joins them anyway")
    return None


def _window(report: Report) -> str:
    """The steps a report's runs measured, in words."""
    steps = report.run.steps
    if not steps:
        return "every step, no --steps"
    first = steps["warmup"] + 1
    return (f"steps {first}-{first + steps['measured'] - 1} (--warmup-steps {steps['warmup']} "
            f"--steps {steps['measured']})")


def _rebased(path: str, node_dir: Path, into: Path | None) -> str:
    """An artifact's path (relative to its node report's folder) relative to ``into``, or
    absolute where the job report's folder is not known yet."""
    if os.path.isabs(path):
        return path
    where = os.path.abspath(node_dir / path)
    return where if into is None else os.path.relpath(where, os.path.abspath(into))


def merge(reports: Sequence[Report], names: Sequence[str], into: Path | None = None) -> Report:
    """Join node reports (in node order, read from the files ``names``) into one job report
    written in the folder ``into``: every node's raw outputs are kept (the later nodes' as
    ``nodeI:label``), their paths relative to ``into``."""
    first = reports[0]
    run = replace(
        first.run, runs=[], duration_s=max(r.run.duration_s for r in reports),
        complete=all(r.run.complete for r in reports))
    environment = dict(first.environment)
    environment["merged_from"] = [
        {"report": name,
         "ranks": sorted({int(m[1]) for x in r.metrics if (m := _RANKED.search(x.name))})}
        for name, r in zip(names, reports, strict=True)]
    job = Report(run=run, environment=environment, backends=list(first.backends))
    for node, report in enumerate(reports):
        for record in report.run.runs:
            job.run.runs.append(record if node == 0 else replace(
                record, id=f"node{node}:{record.id}"))
        node_dir = Path(names[node]).parent
        for b in report.backends:
            kept = job.backend(b.name)
            artifacts = {(f"node{node}:{label}" if node else label):
                         _rebased(path, node_dir, into) for label, path in b.artifacts.items()}
            if kept is None:
                job.backends.append(replace(b, artifacts=artifacts, notes=[
                    f"node {node}: {n}" for n in b.notes]))
            elif node:
                kept.artifacts.update(artifacts)
            else:
                kept.artifacts = artifacts
        for layer in Layer:
            for row in report.layers[layer]:
                rank = row.attrs.get("rank")
                prefix = f"rank{rank}:" if isinstance(rank, int) else f"node{node}:"
                if not row.key.startswith(prefix):
                    row.key = prefix + row.key
                    row.links = {k: [prefix + v for v in vs] for k, vs in row.links.items()}
                job.layers[layer].append(row)
        only = _one_rank(report)
        per_rank = {m.name[:found.start()] for m in report.metrics
                    if (found := _RANKED.search(m.name))}
        for metric in report.metrics:
            if CROSS_RANK.match(metric.name) or metric.name in per_rank:
                continue  # a figure across ranks (a job's mean of its ranks'): computed again
            if only is not None:  # a node report of one rank (analyze of its trace)
                metric.name = f"{metric.name}[rank{only}]"
            elif node and not _RANKED.search(metric.name):
                metric.name = f"{metric.name}[node{node}]"
            job.metrics.append(metric)
        for finding in report.findings:
            if finding.rule in CROSS_RANK_RULES:
                continue
            if node:
                finding.title = f"[node {node}] {finding.title}"
            job.findings.append(finding)
    samples: dict[int, list[float]] = {}
    for metric in job.metrics:  # the baseline's step times, else a backend's (traces)
        found = _RANKED.search(metric.name)
        if found and metric.samples and metric.unit == "s" and metric.samples_of == "steps" \
                and (metric.name.startswith("step_time[") or int(found[1]) not in samples):
            samples[int(found[1])] = [float(s) for s in metric.samples]
    metrics, findings = rank_figures(job, samples, publish_steps=False,
                                     steps_from="each node's baseline runs")
    job.metrics += metrics
    job.findings = order_findings(job.findings + findings)
    merged = merge_across_ranks(job)
    if merged:
        job.environment["rows_across_ranks"] = {"ranks": len(samples), "merged_away": merged}
    return job
