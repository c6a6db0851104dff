"""What went wrong with the run itself: a crash, a hang, an exit with an error (with the line
that raised), an out-of-memory death."""

from __future__ import annotations

import re

from perfstack.analysis.rules.memory import out_of_memory
from perfstack.report import Finding, Report, RunRecord


def _stack_top(record: RunRecord, lines: int = 6) -> list[str]:
    """Return the first lines of faulthandler's dump: the most recent calls come first."""
    if not record.python_stack:
        return ["no Python stack could be had (the process died before or outside Python)"]
    text = [line.rstrip() for line in record.python_stack.strip().splitlines() if line.strip()]
    return text[:lines]


#: A Python traceback's frame line, as the interpreter prints it.
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')


def raised(stderr: str | None, home: str | None) -> tuple[str, str] | None:
    """Return (the exception as Python printed it, ``file:line in function`` of the innermost
    frame in the workload's own code, or of the innermost frame) from the last traceback in a
    process's stderr (its start may be cut off), or None when it printed none. ``home`` is the
    workload's folder: whose code a frame is, is perfstack.analysis.origin's to say."""
    from perfstack.analysis.origin import origin

    if not stderr:
        return None
    header = "Traceback (most recent call last):"
    tail = (stderr[stderr.rindex(header) + len(header):] if header in stderr
            else stderr).splitlines()
    frames = [m for m in (_FRAME.match(line) for line in tail) if m]
    exception = next((line.strip() for line in reversed(tail)
                      if line.strip() and not line.startswith((" ", "\t"))), None)
    if not frames or exception is None or _FRAME.match(exception):
        return None
    ours = [m for m in frames if origin(m["file"], home).ours]
    where = (ours or frames)[-1]
    return exception, f"{where['file']}:{where['line']} in {where['func']}"


def failures(report: Report) -> list[Finding]:
    """The out-of-memory post-mortem where the workload died of it, then one finding for each
    other way its runs failed (a hang, a crash, an exit with an error, with the line that
    raised), naming the runs it happened in."""
    from perfstack.analysis.origin import workload_dir

    home = workload_dir(report)
    raised_at = {r.id: got[1] for r in report.run.runs if not r.exit.clean
                 for got in [raised(r.stderr_tail, home)] if got is not None}
    out, explained = out_of_memory(report, raised_at)  # said once, as what it is
    for kind in ("signalled", "exited", "timeout"):
        # A backend's extra runs (a sweep on another interpreter) are its own to judge.
        bad = [r for r in report.run.runs if r.exit.status == kind and not r.exit.clean
               and r.role != "extra" and r.id not in explained]
        if not bad:
            continue
        first = bad[0]
        ids = ", ".join(r.id for r in bad)
        if kind == "timeout":
            title = f"the workload hung: stopped at the {report.run.timeout_s:g} s timeout"
            action = "the stack shows where it was stuck; raise --timeout if it was just slow"
        elif kind == "signalled":
            title = f"the workload crashed with {first.exit.describe()}"
            action = ("the Python stack shows the last call into native code; run it under gdb "
                      "or with PYTHONFAULTHANDLER=1 to see the native frames")
        else:
            title = f"the workload exited with status {first.exit.code}"
            action = f"see its stderr ({first.stderr}) for the error"
        error = raised(first.stderr_tail, home) if kind == "exited" else None
        if error is not None:
            exception, where = error
            title = f"the workload raised {exception} at {where}"
            action = ("fix the error first: a profile of a failing run measures the failure "
                      f"(the whole traceback is in {first.stderr})")
            detail = [exception, f"raised at {where}",
                      *(first.stderr_tail or "").strip().splitlines()[-6:-1]]
        elif kind == "exited" and not first.python_stack:
            detail = (first.stderr_tail or "it printed nothing on stderr").splitlines()[-4:]
        else:
            detail = _stack_top(first)
        out.append(Finding(
            rule=f"run.{kind if kind != 'signalled' else 'crashed'}", title=title, layer="run",
            severity="critical", evidence=[f"runs: {ids}", *detail], action=action,
            source="perfstack"))
    return out
