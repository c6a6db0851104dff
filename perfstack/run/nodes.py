"""Which node of a multi-node job this is, and the rendezvous every node agrees on.

The launchers say it: torchrun's own options (``--node-rank``, ``--nnodes``) where the user gave
them, else SLURM's environment (``SLURM_NODEID``, ``SLURM_NNODES``, ``SLURM_JOB_NODELIST``),
else torchrun's (``NODE_RANK``, ``GROUP_RANK``). Under SLURM the rendezvous is torchrun's
static one at the job's first host (``MASTER_ADDR``/``MASTER_PORT`` where set): it gives every
run of a node the same global ranks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

#: torchrun's default port for its rendezvous store.
DEFAULT_PORT = 29500


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list in its compressed form: ``gpu[03-05,9],cpu1`` ->
    ``gpu03``; ``host-a,host-b`` -> ``host-a``."""
    depth = 0
    first = nodelist.strip()
    for i, char in enumerate(first):  # the first entry: up to a comma outside brackets
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            first = first[:i]
            break
    while (found := re.search(r"\[([^\]]*)\]", first)) is not None:
        start = re.split(r"[,-]", found[1])[0]
        first = first[:found.start()] + start + first[found.end():]
    return first


def _option(args: Sequence[str], name: str) -> str | None:
    """The value of torchrun's ``--name`` (or ``--name=``; ``-`` and ``_`` alike) in args."""
    spellings = {f"--{name}", f"--{name.replace('-', '_')}"}
    for i, arg in enumerate(args):
        if arg in spellings and i + 1 < len(args):
            return args[i + 1]
        key, _, value = arg.partition("=")
        if key in spellings and value:
            return value
    return None


def slurm_rendezvous(env: Mapping[str, str]) -> list[str] | None:
    """torchrun's options for this node of a SLURM job of several nodes, or None (not under
    SLURM, one node, or SLURM's variables incomplete)."""
    nodes, node, nodelist = (env.get(k, "") for k in
                             ("SLURM_NNODES", "SLURM_NODEID", "SLURM_JOB_NODELIST"))
    if not (env.get("SLURM_JOB_ID") and nodes.isdigit() and node.isdigit() and nodelist):
        return None
    if int(nodes) < 2:
        return None
    host = env.get("MASTER_ADDR") or first_host(nodelist)
    port = env.get("MASTER_PORT") or str(DEFAULT_PORT)
    return ["--nnodes", nodes, "--node-rank", node, "--master-addr", host,
            "--master-port", port]


def node_rank(torchrun_args: Sequence[str], env: Mapping[str, str]) -> int | None:
    """This node's rank in the job: torchrun's ``--node-rank``, else SLURM's or torchrun's
    environment; 0 for a job of one node; None where nothing says."""
    for value in (_option(torchrun_args, "node-rank"), env.get("SLURM_NODEID"),
                  env.get("NODE_RANK"), env.get("GROUP_RANK")):
        if value is not None and value.isdigit():
            return int(value)
    nodes = _option(torchrun_args, "nnodes")
    if "--standalone" in torchrun_args or not torchrun_args or nodes in ("1", "1:1"):
        return 0
    return None


def job_identity(torchrun_args: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
    """What names the job a node belongs to, the same on each of its nodes: SLURM's job id
    (``slurm``) and torchrun's rendezvous (``rendezvous``: its id and endpoint, or the master
    address and port), those that are known; empty for a job of one node."""
    out = {}
    if env.get("SLURM_JOB_ID"):
        out["slurm"] = env["SLURM_JOB_ID"]
    rdzv = _option(torchrun_args, "rdzv-id") or env.get("TORCHELASTIC_RUN_ID")
    endpoint = _option(torchrun_args, "rdzv-endpoint")
    if endpoint is None and _option(torchrun_args, "master-addr") is not None:
        endpoint = (f"{_option(torchrun_args, 'master-addr')}:"
                    f"{_option(torchrun_args, 'master-port') or DEFAULT_PORT}")
    if rdzv and rdzv != "none":
        out["rendezvous"] = f"{rdzv}@{endpoint}" if endpoint else rdzv
    elif endpoint:
        out["rendezvous"] = endpoint
    return out
