"""A job's batches folded on a Dask cluster's workers, two at a time, as they finish.

Each batch's fold (``perfstack.run.recorded.reduce.read_batch``) stays in the memory of the
worker that read it. As soon as two are done, a task merges them on a worker (the same
``Fold.merge`` a local pool's parent does), and its result is merged with the next done,
until one fold is left: the client receives the job's fold once, not a fold a batch. Dask
schedules the merges (near their inputs) and recomputes an input a lost worker held; no
scheduling of our own.

A batch that fails (its worker died, Dask gave up on it) is marked with why and the rest
merge on; a merge that fails marks the batches under it. While nothing finishes, the
cluster's health is asked every CHECK_S; when it says the workers cannot finish, what is
left is given up. Ctrl-C cancels the reading not finished; what was read, merged or being
merged, is fetched (within GRACE_S) and makes the partial report.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import Any

from perfstack import signals

#: While nothing finishes, how often the cluster's health is asked (seconds).
CHECK_S = 1.0
#: How often finished tasks are looked for (seconds).
POLL_S = 0.02
#: After Ctrl-C, how long what was already merged may take to come back (seconds).
GRACE_S = 5.0

#: What a batch's task gives: each unit's result as its fold leaves it, and the fold.
Part = tuple[list[tuple[int, Any]], Any]


def merge_parts(a: Part, b: Part) -> Part:
    """Two batches' results and folds as one (on a worker): the folds merged."""
    results_a, fold_a = a
    results_b, fold_b = b
    fold_a.merge(fold_b)
    return results_a + results_b, fold_a


# long: one loop over the tasks as they finish, each way a wait can end said where it ends
def through(client: Any, leaves: dict[Any, Any], taken: Callable[[Part], None],
            counted: Callable[[Any], None], lost: Callable[[Any, str], None],
            health: Callable[[], str | None] | None) -> None:
    """Wait for the batches' tasks ``leaves`` (each a Dask future, with its batch), merging
    two finished ones at a time on the workers; give the last one left to ``taken``.
    ``counted(batch)`` is told each batch read, ``lost(batch, why)`` each batch not read."""
    as_completed: Any = importlib.import_module("distributed").as_completed  # (untyped)
    covers: dict[Any, list[Any]] = {f: [batch] for f, batch in leaves.items()}
    pending = as_completed(list(leaves), with_results=False)
    ready: list[Any] = []
    checked = time.monotonic()
    try:
        while not pending.is_empty():
            signals.check()  # a signal whose exception a finalizer swallowed: acted on
            finished = pending.next_batch(block=False)
            if not finished:
                time.sleep(POLL_S)
                if health is not None and time.monotonic() - checked >= CHECK_S:
                    checked = time.monotonic()
                    why = health()
                    if why is not None:  # what was merged comes back; the rest is lost
                        client.cancel([f for f in covers if f not in ready])
                        _fetch_ready(ready, taken)
                        for future in covers:
                            if future not in ready:
                                for batch in covers[future]:
                                    lost(batch, why)
                        return
                continue
            checked = time.monotonic()
            for future in finished:
                batches = covers[future]
                if future.status != "finished":  # an error, a lost or cancelled task
                    del covers[future]
                    why = (health() if health is not None else None) or _why(future)
                    for batch in batches:
                        lost(batch, why)
                    continue
                if future in leaves:
                    counted(batches[0])
                ready.append(future)
            while len(ready) >= 2:
                a, b = ready.pop(), ready.pop()
                merged = client.submit(merge_parts, a, b, pure=False)
                covers[merged] = covers.pop(a) + covers.pop(b)
                pending.add(merged)
        for future in ready:
            taken(future.result())
    except KeyboardInterrupt:  # the reading stops; the merges of what was read finish
        client.cancel([f for f in leaves if f in covers and f.status == "pending"])
        merging = [f for f in covers if f not in leaves and f not in ready]
        _fetch_ready([*ready, *merging], taken)
        raise


def _fetch_ready(ready: list[Any], taken: Callable[[Part], None]) -> None:
    """After Ctrl-C: what was read and merged, or is being merged, as far as it comes back
    within GRACE_S."""
    deadline = time.monotonic() + GRACE_S
    for future in ready:
        try:
            taken(future.result(timeout=max(0.1, deadline - time.monotonic())))
        except Exception:  # gone with the cluster, or too slow: those ranks are not read
            continue


def _why(future: Any) -> str:
    """Why a task did not finish, in one line."""
    try:
        exc = future.exception(timeout=CHECK_S)
    except Exception as error:
        exc = error
    what = type(exc).__name__ if exc is not None else future.status
    said = str(exc).splitlines()[0] if exc is not None and str(exc) else ""
    return f"the worker reading it died ({what}: {said})"[:300] if said else \
        f"the worker reading it died ({what})"
