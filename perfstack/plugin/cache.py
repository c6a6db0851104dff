"""What each installed plugin provides, remembered between commands.

Reading a report (``show``, ``diff``) needs a renderer and, for its hints, which backends feed
which layer; importing every installed plugin to learn that costs more than the rest of a
small ``show``. After a command has loaded all plugins, what they provide is written to
``$XDG_CACHE_HOME/perfstack/plugins-<digest>.json`` (``PERFSTACK_CACHE_DIR`` overrides the folder),
under a key that changes whenever it could be wrong:

- perfstack's hook version, and the plugin choices of the command line and environment;
- the modification time of every folder on ``sys.path`` but the first (installing, upgrading
  or removing a distribution adds or removes its ``.dist-info`` there, an editable install its
  ``.pth``); the first is the current folder under ``python -m`` or the ``perfstack``
  script's own, which installs nothing, and a module in it named by ``-p`` is in the key by
  its files;
- the modification time of every ``.py`` file of each plugin's top-level package (an edited
  plugin in a source checkout).

A reader whose key matches uses the cache and imports only the plugins it needs; any other
state loads every plugin, as before, and writes the cache again. A cache that cannot be read
or written is ignored: it only ever saves time.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from perfstack.cachedir import cache_folder
from perfstack.records import datarecord, field

STEM = "plugins"
#: Cache files kept (one per interpreter and plugin choices); the oldest go first.
KEEP = 8
#: Files of one plugin's package looked at, at most (a plugin inside a huge package is
#: checked by its first files only).
MAX_FILES = 400


@datarecord
class Provided:
    """What one plugin provides, by name: its renderers and its backends' layers."""

    name: str
    renderers: list[str] = field(default_factory=list)
    diffs: list[str] = field(default_factory=list)  # its renderers that also draw diffs
    backends: dict[str, list[str]] = field(default_factory=dict)
    #: backend -> the metric name prefixes it publishes (``Backend.publishes``)
    publishes: dict[str, list[str]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # its package's .py files, for the key
    #: backend -> how its raw outputs open: [file name ending, opener] pairs
    openers: dict[str, list[list[str]]] = field(default_factory=dict)
    #: backend -> what to tell a reader when what it gives is missing, by gap
    #: (``Backend.advice``)
    advice: dict[str, dict[str, str]] = field(default_factory=dict)


@datarecord
class Manifest:
    """Every plugin in registration order (a later renderer replaces an earlier one)."""

    plugins: list[Provided]

    def renderer_provider(self, name: str) -> str | None:
        """Return the plugin whose renderer ``name`` is used, or None."""
        found = None
        for plugin in self.plugins:
            if name in plugin.renderers:
                found = plugin.name
        return found

    def renderer_names(self, diffs: bool = False) -> list[str]:
        """Return every format name (``diffs``: of the renderers that draw diffs), sorted."""
        return sorted({r for p in self.plugins for r in (p.diffs if diffs else p.renderers)})

    def metric_providers(self) -> dict[str, list[str]]:
        """Return, per metric name prefix, the backends that publish it (sorted)."""
        return _by_value([p.publishes for p in self.plugins])

    def layer_providers(self) -> dict[str, list[str]]:
        """Return, per layer, the backends that feed it (sorted by backend name)."""
        return _by_value([p.backends for p in self.plugins])

    def artifact_openers(self) -> list[tuple[str, str]]:
        """Return every backend's (file name ending, opener) pairs, in registration order."""
        return [(str(ending), str(how)) for p in self.plugins for pairs in p.openers.values()
                for ending, how in pairs]

    def advice(self) -> dict[str, list[str]]:
        """Return, per gap, what the backends that would fill it advise, in registration
        order."""
        out: dict[str, list[str]] = {}
        for p in self.plugins:
            for said in p.advice.values():
                for gap, words in said.items():
                    out.setdefault(gap, []).append(words)
        return out


def _by_value(per_plugin: list[dict[str, list[str]]]) -> dict[str, list[str]]:
    """Invert each plugin's backend -> [layer or prefix] into layer or prefix -> sorted
    backends (of two backends of one name, the first plugin's counts, as when loading)."""
    by_backend: dict[str, list[str]] = {}
    for backends in per_plugin:
        for name, values in backends.items():
            by_backend.setdefault(name, values)
    out: dict[str, list[str]] = {}
    for backend, values in sorted(by_backend.items()):
        for value in values:
            out.setdefault(value, []).append(backend)
    return out


def cache_file(choices: dict[str, Any]) -> Path:
    """Return where the manifest of this interpreter, ``sys.path`` and plugin choices lives
    (``perfstack`` and ``python -m perfstack`` see different paths: one file each)."""
    import zlib  # a cheap name, not a security hash: the key inside the file is checked

    which = json.dumps([sys.executable, _site_path(), choices], sort_keys=True)
    digest = f"{zlib.crc32(which.encode()):08x}"
    return cache_folder() / f"{STEM}-{digest}.json"


def package_files(module: object, whole: bool = True) -> list[str]:
    """Return the ``.py`` files of the top-level package ``module`` belongs to (at most
    MAX_FILES), or its own file for a module outside any package or when not ``whole`` (the
    core's own plugins: perfstack's other files do not change what they provide)."""
    name = str(getattr(module, "__name__", "") or "")
    top = sys.modules.get(name.split(".")[0]) if name and whole else None
    source = getattr(top, "__file__", None) or getattr(module, "__file__", None)
    if not source:
        return []
    path = Path(source)
    if path.name != "__init__.py":
        return [str(path)]
    files = []
    for found in sorted(path.parent.rglob("*.py")):
        files.append(str(found))
        if len(files) >= MAX_FILES:
            break
    return files


def _site_path() -> list[str]:
    """``sys.path`` without its first entry (the script's folder, or the current one)."""
    return sys.path[1:]


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def state_key(choices: dict[str, Any], files: list[str]) -> list[Any]:
    """Return the key the manifest is valid for: the plugin choices, the sys.path folders'
    and the plugin files' modification times."""
    from perfstack.plugin.mark import HOOK_VERSION

    folders = [[p, _mtime(p)] for p in _site_path() if p and os.path.isdir(p)]
    return [HOOK_VERSION, choices, folders, [[f, _mtime(f)] for f in files]]


def read(choices: dict[str, Any]) -> Manifest | None:
    """Return the cached manifest when its key matches the installation now, else None."""
    try:
        data = json.loads(cache_file(choices).read_text("utf-8"))
        plugins = [Provided(p["name"], list(p["renderers"]), list(p["diffs"]),
                            dict(p["backends"]), dict(p["publishes"]), list(p["files"]),
                            dict(p["openers"]), dict(p["advice"]))
                   for p in data["plugins"]]
        files = [f for p in plugins for f in p.files]
        if data["key"] != json.loads(json.dumps(state_key(choices, files))):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return Manifest(plugins)


def _prune(folder: Path) -> None:
    """Keep the KEEP newest cache files of the folder."""
    files = sorted(folder.glob(f"{STEM}-*.json"), key=lambda f: _mtime(str(f)) or 0)
    for old in files[:-KEEP]:
        with contextlib.suppress(OSError):
            old.unlink()


def write(choices: dict[str, Any], manifest: Manifest) -> None:
    """Remember ``manifest`` for the installation as it is now; never fails."""
    files = [f for p in manifest.plugins for f in p.files]
    target = cache_file(choices)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)  # first: it may be on sys.path
        data = {"key": state_key(choices, files),
                "plugins": [{"name": p.name, "renderers": p.renderers, "diffs": p.diffs,
                             "backends": p.backends, "publishes": p.publishes,
                             "files": p.files, "openers": p.openers, "advice": p.advice}
                            for p in manifest.plugins]}
        tmp.write_text(json.dumps(data), "utf-8")
        os.replace(tmp, target)
        _prune(target.parent)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
