"""One rule for every command's outputs: an output is never an input, the workload's script,
or another output of the same command; and the HTML page a command writes beside its report.

Checked before anything runs or is read, so a refused command has touched nothing. (A device
or a FIFO named as an output is written through, never replaced, a FIFO once something reads it:
perfstack.report.files.)
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfstack import errors

if TYPE_CHECKING:
    from perfstack.plugin.manager import Plugins


def _identity(path: Path) -> tuple[int, int] | None:
    """An existing file's device and inode (after links), or None."""
    try:
        info = path.stat()
    except (OSError, RuntimeError, ValueError):
        return None
    return info.st_dev, info.st_ino


def same_file(a: Path, b: Path) -> bool:
    """Return whether two paths name one file (after links), existing or not."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (pathlib before 3.13)
        return False


def refuse_collisions(outputs: Iterable[tuple[str, Path | None]],
                      inputs: Iterable[tuple[str, Path]]) -> None:
    """Raise UsageError where an output (``(option, path)``; None: not asked for) would
    overwrite an input (``(what it is, path)``) or another output."""
    wanted = [(option, path) for option, path in outputs if path is not None]
    given = [(what, source, _identity(source)) for what, source in inputs]
    for i, (option, path) in enumerate(wanted):
        mine = _identity(path)
        for what, source, theirs in given:
            # an existing file is one by device and inode; an output not there yet is no
            # input that is (a job's thousands of files: a stat each, not a path resolved)
            if (mine == theirs if mine is not None or theirs is not None
                    else same_file(path, source)):
                raise errors.UsageError(f"{option} {path}: that is {what}; name another file")
        for other, earlier in wanted[:i]:
            if same_file(path, earlier) and (path.is_file() or not path.exists()):
                raise errors.UsageError(f"{option} {path} and {other} {earlier} are the same "
                                        "file; one would overwrite the other")


def html_output(html: str | bool | None, report: Path | None) -> Path | None:
    """Return where ``--html`` will write its page, where that is known before the command
    runs: the named file, or the report's own name with .html."""
    if isinstance(html, str) and html:
        return Path(html)
    if html is not None and report is not None:
        return report.with_suffix(".html")
    return None


def to_stdout(path: Path | None) -> bool:
    """Return whether ``-o`` names standard output (``-o -``): the report's JSON is printed."""
    return path is not None and path.as_posix() == "-"


def html_beside(html: str | bool | None, report: Path | None) -> Path | None:
    """``html_output`` for a command whose ``-o`` may be ``-``: the page then needs its own
    name, as there is no report file for it to sit beside."""
    if to_stdout(report):
        if html is not None and not (isinstance(html, str) and html):
            raise errors.UsageError("--html needs a file name when the report goes to "
                                    "standard output (-o -): --html report.html")
        return html_output(html, None)
    return html_output(html, report)


def write_html(plugins: Plugins, report: Any, report_path: Path, html_path: Path, top: int,
                depth: int) -> None:
    """Write the report's HTML page (the installed format that writes .html) to
    ``html_path``."""
    from perfstack.report.files import write_text_atomic

    # The format that writes .html pages (the html plugin's; another plugin may provide it).
    found = next((r for r in plugins.renderers().values()
                  if r.output_file_extension in (".html", ".htm")), None)
    if found is None:
        raise errors.UsageError("--html: no installed output format writes HTML (is the html "
                                "plugin disabled?)")
    write_text_atomic(html_path, found.render(report, plugins.render_options(
        top=top, depth=depth, report_dir=report_path.parent.resolve(),
        output_dir=html_path.parent.resolve())))
