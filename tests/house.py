"""The house's rules, read from the source as text: import circles, long modules and
functions, and backends named by the core. Each check takes the folder it reads, so a test
can plant a fault in a copy and see it caught."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

#: The most lines a module or a function may have without a line saying why.
MODULE_LINES = 400
FUNCTION_LINES = 80
#: The line that says why: a comment ``# long: <reason>`` among a module's first 20 lines, or
#: right above a function's ``def`` (or its decorators).
LONG_MARK = re.compile(r"#\s*long:\s*\S")


def modules(root: Path, tops: Iterable[str]) -> dict[str, Path]:
    """Every module under the given top folders of ``root``, by dotted name."""
    found: dict[str, Path] = {}
    for top in tops:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported(name: str, node: ast.Import | ast.ImportFrom,
              known: dict[str, Path]) -> Iterator[str]:
    """The known modules one import statement of module ``name`` names: the package or module
    it imports from, and each of that package's modules it names."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            while parts and ".".join(parts) not in known:
                parts.pop()
            if parts:
                yield ".".join(parts)
        return
    base = node.module or ""
    if node.level:
        package = name.split(".") if known[name].name == "__init__.py" else name.split(".")[:-1]
        package = package[:len(package) - node.level + 1]
        base = ".".join(package + ([base] if base else []))
    if base in known and "." in base:  # ``from pkg import mod`` runs pkg's __init__ first
        yield base  # (the top packages aside, which every module is inside)
    for alias in node.names:
        if f"{base}.{alias.name}" in known:
            yield f"{base}.{alias.name}"


def import_graph(root: Path, tops: Iterable[str]) -> dict[str, set[str]]:
    """Who imports whom among the modules, counting every import statement: at the top, under
    ``TYPE_CHECKING`` and inside functions alike."""
    known = modules(root, tops)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name].update(m for m in _imported(name, node, known) if m != name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def too_long(root: Path, tops: Iterable[str]) -> list[str]:
    """Modules over MODULE_LINES lines and functions over FUNCTION_LINES with no line saying
    why, as ``path:line: what``."""
    faults = []
    for path in modules(root, tops).values():
        text = path.read_text()
        lines = text.splitlines()
        where = path.relative_to(root).as_posix()
        if len(lines) > MODULE_LINES and not any(LONG_MARK.search(s) for s in lines[:20]):
            faults.append(f"{where}:1: module of {len(lines)} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                length = (node.end_lineno or start) - start + 1
                above = lines[start - 2] if start >= 2 else ""
                if length > FUNCTION_LINES and not LONG_MARK.search(above):
                    faults.append(f"{where}:{node.lineno}: {node.name} of {length} lines")
    return faults


def string_constants(path: Path) -> list[tuple[int, str]]:
    """Every string literal of a module but its docstrings, with its line."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


#: Words spelt exactly so that name a concept, not the backend of the same letters: the GIL
#: (CPython's lock, which the core measures whatever backend saw it) and oneDNN (the library
#: torch's CPU kernels come from, as its authors spell it; the backend reads its log).
CONCEPTS = {"GIL", "oneDNN"}


def backend_words(text: str, names: set[str], plain: set[str]) -> set[str]:
    """The backend names a string says, whatever their case (``PySpy``, ``MEMRAY``): a word of
    ``names`` (words split on ``[\\w-]+``, so ``py-spy`` and ``--torch-stack`` are whole
    words), or a ``--NAME-`` flag of any backend, plain words of the core's own (``plain``)
    aside."""
    said = set()
    named = {n.lower(): n for n in names - plain}
    for word in re.findall(r"[\w-]+", text):
        if word in CONCEPTS:
            continue
        bare = word.strip("-").lower()
        if bare in named:
            said.add(named[bare])
        for name in names:
            if word.lower().startswith(f"--{name.lower()}-"):
                said.add(name)
    return said


def floors(table: str) -> dict[str, int]:
    """The rooms of docs/architecture.md's table and their floors: {path: floor}, a path a
    file (``perfstack/errors.py``) or a folder (``perfstack/run/``)."""
    found: dict[str, int] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].isdigit():
            for path in re.findall(r"`([^`]+)`", cells[1]):
                found[path] = int(cells[0])
    return found


def floor_of(path: str, rooms: dict[str, int]) -> int | None:
    """The floor of the room a file is in: its own entry, else its longest folder's."""
    if path in rooms:
        return rooms[path]
    folders = [room for room in rooms if room.endswith("/") and path.startswith(room)]
    return rooms[max(folders, key=len)] if folders else None


def imports_up(root: Path, tops: Iterable[str], rooms: dict[str, int]) -> list[str]:
    """Every import that runs up the floors of ``rooms`` (as ``a -> b``), and every module
    in no room."""
    known = modules(root, tops)
    where = {name: floor_of(path.relative_to(root).as_posix(), rooms)
             for name, path in known.items()}
    out = [f"{name}: in no room of the table" for name, floor in where.items()
           if floor is None]
    for name, targets in import_graph(root, tops).items():
        for target in targets:
            a, b = where[name], where[target]
            if a is not None and b is not None and b > a:
                out.append(f"{name} (floor {a}) -> {target} (floor {b})")
    return sorted(out)


#: A module or name a docstring points at: ``perfstack.x.y`` or ``perfstack_plugins.x.y``.
DOTTED = re.compile(r"`{1,2}((?:perfstack|perfstack_plugins)(?:\.\w+)+)(?:\(\))?`{1,2}")


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a module, or a name in one (``perfstack.report.Report``)."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if hasattr(found, part):
                found = getattr(found, part)
            elif hasattr(found, "__path__"):  # a package's module not imported yet
                try:
                    found = importlib.import_module(f"{found.__name__}.{part}")
                except ImportError:
                    return False
            else:
                return False
        return True
    return False


def stale_doc_references(root: Path) -> list[str]:
    """Every ``perfstack.x.y`` the README and docs/ name that does not exist."""
    return [f"{path.relative_to(root)}: {found[1]}"
            for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]
            for found in DOTTED.finditer(path.read_text()) if not resolves(found[1])]


def stale_references(root: Path, tops: Iterable[str]) -> list[str]:
    """Every ``perfstack.x.y`` a docstring of ``tops`` names that does not exist."""
    out = []
    for top in tops:
        for path in sorted((root / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                     ast.AsyncFunctionDef)):
                    for found in DOTTED.finditer(ast.get_docstring(node) or ""):
                        if not resolves(found[1]):
                            out.append(f"{path.relative_to(root)}: {found[1]}")
    return out
