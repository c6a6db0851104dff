"""Events that Kineto wrote as invalid JSON, read anyway.

Kineto writes an event's name verbatim between quotes, escaping nothing: a name that holds a
quote makes its event invalid JSON. Seen here in a torch 2.13 CPU trace of a ten-line script
(``--torch-stack``): ``"name": "torch/profiler/_cupti_monitor.py(0): "python_s"",``. A reader
that stops at such an event loses every event after it, so the trace would look cut short.
The event is decoded again with the quotes of its ``"name"`` lines escaped.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Where an event ends: before the next event of the array, or before the array's end.
_EVENT_END = re.compile(r"\}\s*,\s*\{|\}\s*\]")
#: A name line as Kineto writes it, one key a line: ``    "name": "...",``.
_NAME_LINE = re.compile(r'^(\s*"name"\s*:\s*")(.*)("\s*,?\s*)$', re.MULTILINE)
_BARE_QUOTE = re.compile(r'(?<!\\)"')


def _escaped(match: re.Match[str]) -> str:
    return match[1] + _BARE_QUOTE.sub(r'\\"', match[2]) + match[3]


def repaired_event(text: str, pos: int) -> tuple[Any, int] | None:
    """Decode the event that starts at ``text[pos]`` with bare quotes in its name lines
    escaped; return it and where it ends, or None when that does not make it JSON (or its end
    is not in ``text`` yet)."""
    end = _EVENT_END.search(text, pos)
    if end is None:
        return None
    stop = end.start() + 1
    event = text[pos:stop]
    fixed = _NAME_LINE.sub(_escaped, event)
    if fixed == event:
        return None
    try:
        return json.loads(fixed), stop
    except json.JSONDecodeError:
        return None


def loads_trace(text: str) -> Any:
    """A whole trace's JSON; where Kineto left a bare quote in a name, read with it escaped
    (``json.JSONDecodeError`` when that is not the fault)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        fixed = _NAME_LINE.sub(_escaped, text)
        if fixed == text:
            raise
        return json.loads(fixed)
