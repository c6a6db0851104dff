"""The environment facts two reports are compared on: what changes the workload's conditions
(versions, hardware, settings), never perfstack's own measurements of the machine."""

from __future__ import annotations

from typing import Any

from perfstack.analysis.diff.changes import EnvChange
from perfstack.report import Report

#: Environment facts that change performance, as (label, path in the environment block).
ENV_FACTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Python", ("python", "version")),
    ("Python implementation", ("python", "implementation")),
    ("GIL enabled", ("python", "gil_enabled")),
    ("torch version", ("torch", "version")),
    ("torch build (git)", ("torch", "git_version")),
    ("torch debug build", ("torch", "debug")),
    ("torch CUDA", ("torch", "cuda")),
    ("torch CPU capability", ("torch", "cpu_capability")),
    ("torch intra-op threads", ("torch", "intra_op_threads")),
    ("torch inter-op threads", ("torch", "inter_op_threads")),
    ("CPU model", ("cpu", "model")),
    ("CPU ISA", ("cpu", "isa")),
    ("logical CPUs", ("cpu", "logical_cpus")),
    ("usable CPUs", ("cpu", "affinity")),
    ("sockets", ("cpu", "sockets")),
    ("thread settings", ("threads",)),
    ("OS release", ("os", "release")),
    ("installed packages", ("packages",)),
)


def _get(env: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = env
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def environment_changes(base: Report, new: Report) -> list[EnvChange]:
    """Return the environment facts that differ (one missing on a side is not a difference)."""
    out = []
    from perfstack.machine.environment import plugin_blocks

    def fields(env: dict[str, Any], block: str) -> list[str]:
        found = env.get(block)
        return list(found) if isinstance(found, dict) else []

    # A plugin's block (perfstack_environment): each of its fields, compared as it is.
    plugin_facts = [(f"{block} {name}", (block, name))
                    for block in dict.fromkeys([*plugin_blocks(base.environment),
                                                *plugin_blocks(new.environment)])
                    for name in dict.fromkeys([*fields(base.environment, block),
                                               *fields(new.environment, block)])]
    for label, path in [*ENV_FACTS, *plugin_facts]:
        a, b = _get(base.environment, path), _get(new.environment, path)
        if a is None or b is None or a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            keys = sorted(set(a) | set(b))
            a = {k: a.get(k) for k in keys if a.get(k) != b.get(k)}
            b = {k: b.get(k) for k in keys if k in a}
        out.append(EnvChange(label, a, b))
    return out
