"""The loaded plugins and calling them (``Plugins``); loading them is ``perfstack.plugin.load``.

Every call of a hook goes to each plugin separately, so one plugin that raises cannot take
the others' results with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from perfstack.plugin.calls import call
from perfstack.plugin.mark import hookimpl as hookimpl
from perfstack.records import datarecord, field
from perfstack.report import Finding, Report

if TYPE_CHECKING:
    import pluggy

    from perfstack.plugin.backend import Backend
    from perfstack.plugin.renderer import Renderer, RenderOptions

#: The core's own plugins (findings about the run itself, the terminal renderer). They are
#: not backends: nothing in the core names a backend.
CORE_PLUGINS = ("perfstack.analysis.rules", "perfstack.render.text", "perfstack.render.pyperf",
                "perfstack.render.markdown", "perfstack.render.jsonreport")


@datarecord
class PluginInfo:
    """One plugin as loaded (or not): its name, where it comes from, and any load error."""

    name: str
    package: str | None  # "dist-name version", None for the core's own plugins
    error: str | None = None  # the traceback when it could not be loaded


@datarecord
class BackendEntry:
    """A backend together with the plugin and package that provide it."""

    backend: Backend
    plugin: str
    package: str | None


@datarecord
class HookResult:
    """One plugin's answer to one hook call: a result, or the traceback of what it raised."""

    plugin: str
    result: Any
    error: str | None = None


@datarecord
class Plugins:
    """A loaded plugin manager plus what perfstack learned while loading it.

    Loaded with ``defer=True``, only the core's plugins are imported at first: the renderer
    and layer questions of a reader are answered from the plugin cache
    (``perfstack.plugin.cache``) where it is valid, and anything else loads the rest first.
    pluggy's manager (``pm``) is made, with the core's plugins in it, on the first hook
    call: a core format named by a valid cache is drawn without it (``renderer``).
    """

    #: makes pluggy's manager with the core's plugins registered (``pm``)
    start: Callable[[], pluggy.PluginManager]
    infos: dict[str, PluginInfo]
    #: loads the plugins not loaded yet (deferred loading); None once everything is loaded
    pending: Callable[[], None] | None = None
    #: the command's plugin choices, part of the cache's key; None: not cached
    choices: dict[str, Any] | None = None
    _manifest: Any = field(default=None, repr=False)
    _built: Any = field(default=None, repr=False)
    _backends: tuple[dict[str, BackendEntry], list[HookResult]] | None = field(
        default=None, repr=False)
    #: every hook call that raised, (hook name, answer), in order: each becomes a
    #: ``perfstack.plugin-error`` finding of the report (``findings``)
    errors: list[tuple[str, HookResult]] = field(default_factory=list)
    _pm: pluggy.PluginManager | None = field(default=None, repr=False)

    @property
    def pm(self) -> pluggy.PluginManager:
        """pluggy's manager, made on first use."""
        if self._pm is None:
            self._pm = self.start()
        return self._pm

    def load_all(self) -> None:
        """Load every plugin not loaded yet (deferred loading), and refresh the cache."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending()
            self._remember()

    def _remember(self) -> None:
        from perfstack.plugin import cache as plugincache

        if self.choices is not None and plugincache.read(self.choices) is None:
            plugincache.write(self.choices, self._described())

    def _described(self) -> Any:
        """Return what every loaded plugin provides, as a ``plugincache.Manifest`` (the one
        written to the cache), built once per load."""
        from perfstack.plugin import cache as plugincache

        if self._built is not None:
            return self._built
        from perfstack.plugin.renderer import DiffRenderer  # the contract, declared there

        renderers = {a.plugin: a.result for a in self.call_loaded("perfstack_renderers")}
        backends = {a.plugin: a.result for a in self.call_loaded("perfstack_backends")}
        provided = []
        for name, info in self.infos.items():
            if info.error is not None:
                continue
            backs, publishes, openers, advice = {}, {}, {}, {}
            for item in backends.get(name) or ():
                if _backend_problem(item) is None:
                    backs[item.name] = [layer.value for layer in item.layers]
                    publishes[item.name] = [str(p) for p in item.publishes]
                    openers[item.name] = [[str(e), str(h)] for e, h in item.openers]
                    advice[item.name] = {str(g): str(w) for g, w in item.advice.items()}
            plugin = self.pm.get_plugin(name)
            drawn = list(renderers.get(name) or ())
            provided.append(plugincache.Provided(
                name, [str(getattr(r, "name", "")) for r in drawn],
                [str(getattr(r, "name", "")) for r in drawn if isinstance(r, DiffRenderer)],
                backs, publishes,
                plugincache.package_files(plugin, whole=name not in CORE_PLUGINS), openers,
                advice))
        self._built = plugincache.Manifest(provided)
        return self._built

    def manifest(self) -> Any:
        """Return the valid plugin cache of a deferred load, else None (everything is
        loaded, or the cache does not match the installation)."""
        if self.pending is None or self.choices is None:
            return None
        if self._manifest is None:
            from perfstack.plugin import cache as plugincache

            self._manifest = plugincache.read(self.choices) or False
        return self._manifest or None

    def _provided(self) -> Any:
        """The cache of a deferred load where it is valid, else what the loaded plugins say
        (loading them all first)."""
        manifest = self.manifest()
        if manifest is not None:
            return manifest
        self.load_all()
        return self._described()

    def renderer_names(self, diffs: bool = False) -> list[str]:
        """Return the names of every output format (``diffs``: of those that draw diffs),
        sorted."""
        return list(self._provided().renderer_names(diffs))

    def renderer(self, name: str) -> Renderer | None:
        """Return the renderer of format ``name``, or None. A core format no plugin replaces
        is found without loading any plugin."""
        manifest = self.manifest()
        provider = manifest.renderer_provider(name) if manifest is not None else None
        if provider in CORE_PLUGINS and self._pm is None:
            return self._core_renderer(provider, name)
        if provider in CORE_PLUGINS:
            return self.renderers(loaded_only=True).get(name)
        return self.renderers().get(name)

    def _core_renderer(self, plugin: str, name: str) -> Renderer | None:
        """The renderer ``name`` of the core plugin ``plugin``, asked before pluggy's manager
        is made: the answer ``call_loaded`` would give, as the only plugins loaded are the
        core's and each is called alone (a failure is kept in ``errors`` the same way)."""
        import importlib

        from perfstack.plugin.renderer import Renderer

        hook = "perfstack_renderers"
        called = call(lambda: getattr(importlib.import_module(plugin), hook)(), hook)
        if not called.ok:
            self.errors.append((hook, HookResult(plugin, None, called.error)))
            return None
        found = [r for r in called.value or () if isinstance(r, Renderer) and r.name == name]
        return found[-1] if found else None

    def renderers(self, loaded_only: bool = False) -> dict[str, Renderer]:
        """Return every renderer by name; a later plugin's renderer replaces an earlier one's.
        ``loaded_only``: of the plugins a deferred load has loaded so far."""
        from perfstack.plugin.renderer import Renderer

        found: dict[str, Renderer] = {}
        call = self.call_loaded if loaded_only else self.call_each
        for answer in call("perfstack_renderers"):
            for item in answer.result or ():
                if isinstance(item, Renderer):
                    found[item.name] = item
        return found

    def metric_providers(self) -> dict[str, list[str]]:
        """Return, per metric name prefix, the installed backends that publish it."""
        return dict(self._provided().metric_providers())

    def artifact_openers(self) -> list[tuple[str, str]]:
        """Return how the installed backends' raw outputs open: (file name ending, opener)."""
        return list(self._provided().artifact_openers())

    def layer_providers(self) -> dict[str, list[str]]:
        """Return, per layer, the installed backends that feed it."""
        return dict(self._provided().layer_providers())

    def advice(self) -> dict[str, list[str]]:
        """Return, per gap, what the installed backends that would fill it advise
        (``Backend.advice``)."""
        return dict(self._provided().advice())

    def render_options(self, **options: Any) -> RenderOptions:
        """Return ``RenderOptions(**options)`` with what the installed backends declare
        (the layers they feed, the metrics they publish, how their outputs open, their
        advice): every format words its hints from these, naming no backend itself."""
        from perfstack.plugin.renderer import RenderOptions

        return RenderOptions(layer_providers=self.layer_providers(),
                             metric_providers=self.metric_providers(),
                             artifact_openers=self.artifact_openers(), advice=self.advice(),
                             **options)

    def call_each(self, hook_name: str, **kwargs: Any) -> list[HookResult]:
        """Call one hook on every plugin separately; return each answer or error, in order."""
        self.load_all()
        return self.call_loaded(hook_name, **kwargs)

    def call_loaded(self, hook_name: str, **kwargs: Any) -> list[HookResult]:
        """``call_each`` on the plugins loaded so far (all of them, unless deferred).

        This is the one place perfstack calls hooks. Each plugin is called through pluggy's
        own call loop (a subset caller holding that plugin alone), so pluggy's hook tracing
        and call monitoring see every call; a plugin that raises is kept as an error answer
        (and in ``errors``), and the others are still called."""
        impls = getattr(self.pm.hook, hook_name).get_hookimpls()
        answers = []
        for impl in impls:
            alone = self.pm.subset_hook_caller(
                hook_name, remove_plugins=[i.plugin for i in impls if i is not impl])
            called = call(lambda: alone(**kwargs), hook_name)  # noqa: B023
            if not called.ok:
                answer = HookResult(impl.plugin_name, None, called.error)
                self.errors.append((hook_name, answer))
                answers.append(answer)
                continue
            results = called.value
            answers.append(HookResult(impl.plugin_name, results[0] if results else None))
        return answers

    def findings(self, report: Report) -> list[Finding]:
        """Call every plugin's ``perfstack_findings`` on a finished report; return their
        findings (those that do not fit the schema are dropped) and one
        ``perfstack.plugin-error`` finding, with its traceback, for every hook call of this
        session that raised (finding rules, backends, environment facts, renderers)."""
        from perfstack.report.files import schema_errors

        found: list[Finding] = []
        for answer in self.call_each("perfstack_findings", report=report):
            for item in answer.result or ():
                if isinstance(item, Finding) and not schema_errors(item.to_dict(), "finding"):
                    found.append(item)
        seen: set[tuple[str, str]] = set()
        for hook_name, answer in self.errors:
            if (hook_name, answer.plugin) in seen or answer.error is None:
                continue
            seen.add((hook_name, answer.plugin))
            what = {"perfstack_findings": "finding rules",
                    "perfstack_backends": "backends",
                    "perfstack_environment": "environment facts",
                    "perfstack_renderers": "output formats"}.get(hook_name, hook_name)
            found.append(Finding(
                rule="perfstack.plugin-error",
                title=f"the {what} of plugin {answer.plugin} failed ({hook_name} raised)",
                layer="run", severity="warning",
                evidence=answer.error.strip().splitlines()[-3:],
                action="report this to the plugin's authors (the traceback is in the "
                       "finding's evidence; `perfstack plugins` lists the plugin)",
                source=answer.plugin))
        return found

    def package_of(self, plugin: str) -> str | None:
        """Return the "dist version" a plugin comes from, when known."""
        info = self.infos.get(plugin)
        return info.package if info else None

    def backends(self) -> tuple[dict[str, BackendEntry], list[HookResult]]:
        """Return the backends by name, and the plugins whose ``perfstack_backends`` failed
        (asked once: a command's every part sees the same backends)."""
        if self._backends is None:
            self._backends = self._listed()
        return self._backends

    def _listed(self) -> tuple[dict[str, BackendEntry], list[HookResult]]:
        found: dict[str, BackendEntry] = {}
        failures: list[HookResult] = []
        for answer in self.call_each("perfstack_backends"):
            if answer.error is not None:
                failures.append(answer)
                continue
            for item in answer.result or ():
                problem = _backend_problem(item)
                if problem is None and item.name in found:
                    problem = f"backend {item.name!r} is also provided by {found[item.name].plugin}"
                if problem is not None:
                    failures.append(HookResult(answer.plugin, None, problem))
                    continue
                found[item.name] = BackendEntry(item, answer.plugin, self.package_of(answer.plugin))
        return found, failures


def _backend_problem(item: object) -> str | None:
    from perfstack.plugin.backend import Backend

    if not isinstance(item, Backend):
        return f"perfstack_backends returned {type(item).__name__}, not a perfstack.Backend"
    name = getattr(item, "name", None)
    if not isinstance(name, str) or not name or "," in name or name != name.strip():
        return f"{type(item).__name__} has no usable name (got {name!r})"
    if not getattr(item, "layers", None):
        return f"backend {name!r} declares no layers"
    return None
