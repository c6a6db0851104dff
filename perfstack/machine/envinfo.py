"""``perfstack env``: the platform check (the Intel seed's ``check_platform.sh``).

Everything the report's environment block holds, plus what is too slow to gather on every
run: torch's build configuration (torch is imported in a child process, so a broken torch
cannot take this command down), each backend's availability with its fix, the free-threaded
interpreters found, and pyperf's system-state checks with advice on reducing noise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from perfstack.machine import environment, interpreters
from perfstack.machine.roofline import ceilings
from perfstack.plugin.backend import availability
from perfstack.plugin.manager import Plugins
from perfstack.report.units import fmt_seconds, fmt_si

_TORCH_PROBE = """
import json, sys
import torch
from perfstack.inprocess.bootstrap import torch_facts
facts = torch_facts() or {}
build = {}
libraries = []
for line in torch.__config__.show().splitlines():
    line = line.strip().removeprefix("- ")
    if line and not line.startswith(("Build settings:", "PyTorch built with")):
        libraries.append(line)
    if line.startswith("Build settings:"):
        for part in line.split(":", 1)[1].split(", "):
            key, _, value = part.partition("=")
            if key.strip():
                build[key.strip()] = value.strip()
facts["build_settings"] = build
facts["libraries"] = libraries
facts["parallel_info"] = [l.strip() for l in torch.__config__.parallel_info().splitlines()
                          if l.strip() and not l.startswith("-")]
print(json.dumps(facts, default=str))
"""


def torch_details(timeout_s: float = 120.0) -> dict[str, Any]:
    """Return torch's version, capability, threads and build settings, or why there are none."""
    try:
        proc = subprocess.run([sys.executable, "-c", _TORCH_PROBE], capture_output=True,
                              text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"available": False, "reason": f"importing torch took over {timeout_s:.0f} s"}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"available": False, "reason": f"torch does not import: {last}"}
    try:
        return {"available": True, **json.loads(proc.stdout.strip().splitlines()[-1])}
    except (ValueError, IndexError):
        return {"available": False, "reason": "torch's probe printed nothing readable"}


def pyperf_system() -> dict[str, Any]:
    """Return pyperf's system-state checks: ``python -m pyperf system show``, by section."""
    try:
        proc = subprocess.run([sys.executable, "-m", "pyperf", "system", "show"],
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return {"available": False, "reason": "pyperf system show took over 60 s"}
    sections: dict[str, list[str]] = {"state": [], "advice": [], "warnings": [], "errors": []}
    names = {"System state": "state", "Advices": "advice", "Warnings": "warnings",
             "Errors": "errors"}
    current: str | None = None
    lines = proc.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.strip() in names and i + 1 < len(lines) and set(lines[i + 1].strip()) == {"="}:
            current = names[line.strip()]
        elif current and line.strip() and set(line.strip()) != {"="}:
            if line.startswith("Run \"python -m pyperf system tune\""):
                continue
            sections[current].append(line.strip())
    return {"available": True, **sections}


def _noise_advice(env: dict[str, Any], system: dict[str, Any]) -> list[str]:
    advice = []
    for line in system.get("state", []):
        low = line.lower()
        if "scaling_governor" in low or ("governor" in low and "performance" not in low):
            advice.append(f"CPU frequency: {line}: set the 'performance' governor "
                          "(python -m pyperf system tune does it)")
        if "turbo boost" in low and "enabled" in low:
            advice.append("Turbo Boost is on: clocks change with load and temperature; "
                          "turn it off for stable timings")
    if not any("isolated" in line.lower() and "no cpu" not in line.lower()
               for line in system.get("state", [])):
        advice.append("no isolated CPUs: other processes share the cores; pin the workload "
                      "(taskset) and repeat runs (perfstack run --repeat 5), compare medians")
    if env["cpu"].get("affinity") and len(env["cpu"]["affinity"]) != env["cpu"].get(
            "logical_cpus"):
        advice.append(f"this process may use CPUs {env['cpu']['affinity']} of "
                      f"{env['cpu']['logical_cpus']}: thread counts should follow that")
    return advice + [f"pyperf: {line}" for line in system.get("advice", [])]


def with_plugins(plugins: Plugins) -> dict[str, Any]:
    """Return the core environment block plus each plugin's ``perfstack_environment`` facts
    and the versions of the packages the backends declare. A plugin whose hook raises is
    recorded under ``plugin_errors``, not lost."""
    env = environment.capture()
    declared = [p for entry in plugins.backends()[0].values() for p in entry.backend.packages]
    env["packages"].update(environment.packages(dict.fromkeys(declared)))
    for answer in plugins.call_each("perfstack_environment"):
        if answer.error is not None:
            env.setdefault("plugin_errors", {})[answer.plugin] = answer.error
        elif isinstance(answer.result, dict):
            env.update(answer.result)
    return env


def gather(plugins: Plugins, with_torch: bool = True, with_system: bool = True,
           measure_ceilings: bool = False) -> dict[str, Any]:
    """Return the full platform description ``perfstack env`` prints; the machine's ceilings
    as cached (at torch's default thread count), measured again with ``measure_ceilings``."""
    env = with_plugins(plugins)
    if with_torch:
        env["torch"] = torch_details()
    threads = (env.get("torch") or {}).get("intra_op_threads")
    threads = threads if isinstance(threads, int) else None
    if measure_ceilings:
        try:
            env["ceilings"] = ceilings.measure(threads).as_dict()
        except RuntimeError as exc:
            env["ceilings"] = {"unknown": str(exc)}
    else:
        found = ceilings.cached(threads)
        named = os.environ.get(ceilings.CEILINGS_ENV)
        env["ceilings"] = found.as_dict() if found is not None else {
            "unknown": f"{ceilings.CEILINGS_ENV}={named} is not a ceilings file (a regular "
                       "file, as perfstack env --measure-ceilings writes one)"
            if named and named != "off" else
            "not measured yet: perfstack env --measure-ceilings measures them "
            "(a few seconds, alone on the machine); perfstack run does on its "
            "first run of costed ops"}
    backends = {}
    for name, entry in sorted(plugins.backends()[0].items()):
        available = availability(entry.backend)
        backends[name] = {"available": available.ok, "reason": available.reason,
                          "fix": available.fix}
    env["backends"] = backends
    env["free_threaded_interpreters"] = [
        {"path": i.path, "version": i.version, "label": i.label}
        for i in interpreters.find_free_threaded()]
    if with_system:
        env["system"] = pyperf_system()
        env["noise_advice"] = _noise_advice(env, env["system"])
    return env


def _fit(line: str, width: int) -> list[str]:
    """One line of the platform check, wrapped at ``width`` between words: a ``key  value``
    item continues under its value, a list item under its text."""
    if len(line) <= width:
        return [line]
    import textwrap

    body = line.lstrip(" ")
    lead = len(line) - len(body)
    if lead == 2 and len(line) > 25 and line[24] == " " and line[25] != " ":
        hang = 25  # an item: "  key (22 wide) value"
    elif body.startswith(("- ", "warning: ")):
        hang = lead + body.index(" ") + 1
    else:
        hang = lead + 2
    return textwrap.wrap(line, width, subsequent_indent=" " * hang, break_on_hyphens=False,
                         break_long_words=True) or [line]


# long: the sections of `perfstack env`, in the order printed
def render_text(env: dict[str, Any], width: int = 100) -> str:
    """Return ``env`` as the plain text ``perfstack env`` prints, wrapped at ``width``."""
    out: list[str] = []

    def section(title: str) -> None:
        out.append("")
        out.append(title)
        out.append("-" * len(title))

    def item(key: str, value: Any) -> None:
        out.append(f"  {key:<22} {value}")

    py = env["python"]
    section("Python")
    item("interpreter", f"{py['implementation']} {py['version']} ({py['executable']})")
    item("GIL", "enabled" if py.get("gil_enabled", True) else "disabled (free-threaded)")
    ft = env.get("free_threaded_interpreters") or []
    item("free-threaded found", ", ".join(f"{i['label']} {i['path']}" for i in ft) or
         "none (scripts/build-free-threaded.sh builds one)")
    cpu = env["cpu"]
    section("CPU")
    item("model", cpu.get("model") or "unknown")
    item("sockets / cores", f"{cpu.get('sockets') or '?'} sockets, "
         f"{cpu.get('physical_cores') or '?'} cores, {cpu.get('logical_cpus') or '?'} threads, "
         f"{cpu.get('numa_nodes') or '?'} NUMA nodes")
    item("usable CPUs", cpu.get("affinity"))
    item("ISA", ", ".join(cpu.get("isa") or []) or "unknown")
    torch = env.get("torch") or {}
    section("torch")
    if torch.get("available"):
        item("version", f"{torch.get('version')} (git {str(torch.get('git_version'))[:10]})")
        item("uses ISA", torch.get("cpu_capability"))
        item("CUDA / ROCm", f"{torch.get('cuda') or '-'} / {torch.get('hip') or '-'}"
             f" (GPU available: {torch.get('cuda_available')})")
        item("threads", f"intra-op {torch.get('intra_op_threads')}, "
             f"inter-op {torch.get('inter_op_threads')}")
        for line in torch.get("libraries") or []:
            if any(word in line for word in ("Math Kernel", "MKL-DNN", "OpenMP", "cuDNN",
                                             "CUDA Runtime")):
                item("built with", line[:100])
        build = torch.get("build_settings") or {}
        wanted = ("BLAS_INFO", "USE_MKLDNN", "USE_OPENMP", "USE_CUDA", "USE_ROCM")
        for key in wanted:
            if key in build:
                item(key, build[key][:100])
    else:
        item("torch", torch.get("reason", "not checked"))
    section("Ceilings (for the roofline)")
    roofs = env.get("ceilings") or {}
    if "peak_flops" in roofs:
        for kind, value in roofs["peak_flops"].items():
            item(f"peak {kind}", fmt_si(value, "flop/s") + " (matrix products)")
        if roofs.get("bandwidth"):
            item("memory bandwidth", fmt_si(roofs["bandwidth"], "B/s")
                 + " (the best of a copy, a triad and an update in place)")
        if roofs.get("dispatch_s"):
            item("a call's fixed cost", fmt_seconds(roofs["dispatch_s"]) + " (a tiny op)")
        how = roofs.get("how") or {}
        item("measured", f"{how.get('measured', '?')} at {roofs.get('threads')} threads, "
             f"torch {how.get('torch', '?')}, in {how.get('seconds') or 0:.0f} s")
    else:
        item("ceilings", roofs.get("unknown", "unknown"))
    section("Thread settings")
    threads = env.get("threads") or {}
    for key in environment.THREAD_VARIABLES:
        if key in threads:
            item(key, threads[key])
    if not threads:
        item("(none set)", "OMP_NUM_THREADS etc. unset: libraries pick their defaults")
    section("Profilers")
    item("perf_event_paranoid", env.get("perf_event_paranoid"))
    for block in environment.plugin_blocks(env):  # what each plugin said about the machine
        item(block, environment.describe_block(env[block]))
    for name, b in (env.get("backends") or {}).items():
        state = "available" if b["available"] else f"unavailable: {b['reason']}"
        if b.get("fix") and not b["available"]:
            state += f" (fix: {b['fix']})"
        item(f"backend {name}", state)
    system = env.get("system") or {}
    if system.get("available"):
        section("System state (pyperf)")
        for line in system.get("state", []):
            out.append(f"  {line}")
        for line in system.get("warnings", []):
            out.append(f"  warning: {line}")
    advice = env.get("noise_advice") or []
    if advice:
        section("To reduce noise")
        out += [f"  - {line}" for line in advice]
    return "\n".join(part for line in out for part in _fit(line, width)).lstrip("\n") + "\n"
