"""``perfstack ab``: two versions of a workload compared in one session, their runs interleaved.

Two sessions minutes apart on a shared machine differ by more than either's repeats vary, so
comparing them needs a wide noise band. Interleaving the two sides' baseline runs (A B B A A
B ...) puts both under the same drift, and a paired test on the i-th runs of each side sees
through it. Each side's backends then run once, also interleaved, and each side is an ordinary
report; the two carry the same pairing id, so ``perfstack diff`` pairs them again later.

Two forms: two scripts, or one script at two git revisions, each checked out into a temporary
worktree (the user's own tree is never touched) and removed afterwards.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from perfstack.errors import InputNotFound, UsageError
from perfstack.records import datarecord
from perfstack.report import Report
from perfstack.run.driver import Session

SIDES = ("base", "new")


def run_interleaved(base: Session, new: Session, repeat: int, warmup: int) -> tuple[Report,
                                                                                      Report]:
    """Run both sessions' baselines interleaved (warm-ups first, then pairs in A B B A order),
    then their backends one after the other, and return the two reports, paired.

    The baseline stops on both sides when one side's run does not finish cleanly or the user
    interrupts, so the pairs stay whole.
    """
    sessions = (base, new)
    for session in sessions:
        session.begin()
    plan = [("warmup", i) for i in range(1, warmup + 1)]
    plan += [("baseline", i) for i in range(1, repeat + 1)]
    try:
        for role, i in plan:
            # Both sides run each index, so the pairs stay whole, unless the user interrupts.
            whole = True
            for session in sessions if i % 2 else sessions[::-1]:
                whole = session.baseline_run(role, i) and whole
                if session.interrupted:
                    break
            if not whole:
                break
    except KeyboardInterrupt:
        base.interrupted = new.interrupted = True
    if base.interrupted or new.interrupted:
        base.interrupted = new.interrupted = True
    for i, (a, b) in enumerate(zip(base.selected, new.selected, strict=True)):
        for session, entry in ((base, a), (new, b)) if i % 2 == 0 else ((new, b), (base, a)):
            session.run_backend(entry)
            if session.interrupted:
                base.interrupted = new.interrupted = True
    pairing = uuid.uuid4().hex[:12]
    reports = (base.finish(), new.finish())
    for side, report in zip(SIDES, reports, strict=True):
        report.run.pairing = {"id": pairing, "side": side}
    return reports


@datarecord
class Checkout:
    """One side's files: where the script is and where to run it from."""

    label: str  # what the user named: a path, or a revision with its commit
    script: Path
    cwd: Path


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          timeout=120)
    if proc.returncode != 0:
        message = (proc.stderr.strip().splitlines() or ["git failed"])[-1]
        raise UsageError(f"git {args[0]}: {message}")
    return proc.stdout.strip()


def repository_of(path: Path) -> Path:
    """Return the top folder of the git repository that holds ``path``."""
    try:
        return Path(_git(path.parent if path.is_file() else path, "rev-parse",
                         "--show-toplevel"))
    except FileNotFoundError:
        raise UsageError("--rev needs git, which is not installed") from None
    except UsageError:
        raise UsageError(f"{path}: not inside a git repository (--rev checks out revisions "
                         "of the repository that holds the script)") from None


def resolve_revisions(script: Path, revs: tuple[str, str]) -> tuple[Path, list[str]]:
    """Return the repository holding ``script`` and the commit of each revision; a missing
    script, a folder outside git or an unknown revision is one clear error."""
    if not script.is_file():
        raise InputNotFound(f"{script}: no such file")
    repo = repository_of(script.resolve())
    commits = []
    for rev in revs:
        try:
            commits.append(_git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"))
        except UsageError:
            raise UsageError(f"--rev {rev}: not a revision of {repo}") from None
    return repo, commits


@contextlib.contextmanager
def revisions(script: Path, revs: tuple[str, str]) -> Iterator[tuple[Checkout, Checkout]]:
    """Check the repository holding ``script`` out at both revisions, in temporary worktrees
    outside the user's tree, and yield where the script is in each; remove them afterwards."""
    repo, commits = resolve_revisions(script, revs)
    inside = script.resolve().relative_to(repo)
    here = Path(os.getcwd()).resolve()
    cwd_inside = here.relative_to(repo) if here.is_relative_to(repo) else None
    with tempfile.TemporaryDirectory(prefix="perfstack-ab-") as tmp:
        trees: list[Path] = []
        try:
            checkouts = []
            for side, rev, commit in zip(SIDES, revs, commits, strict=True):
                tree = Path(tmp) / side
                _git(repo, "worktree", "add", "--detach", "--quiet", str(tree), commit)
                trees.append(tree)
                if not (tree / inside).is_file():
                    raise InputNotFound(f"{inside}: not in revision {rev}")
                if cwd_inside is not None and not (tree / cwd_inside).is_dir():
                    # The runs would start in a folder the revision lacks: the workload would
                    # be blamed for perfstack's choice of folder.
                    raise UsageError(
                        f"the folder you run from ({cwd_inside}) is not in revision {rev}: "
                        "run 'perfstack ab --rev' from a folder both revisions have (the "
                        "repository's root, say)")
                checkouts.append(Checkout(f"{rev} ({commit[:10]})", tree / inside,
                                          tree / cwd_inside if cwd_inside else tree))
            yield checkouts[0], checkouts[1]
        finally:
            for tree in trees:
                subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force",
                                str(tree)], capture_output=True, timeout=120)
            subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True,
                           timeout=120)
