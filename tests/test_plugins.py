"""Plugin discovery and isolation, each test with a fresh plugin manager."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pluggy

from perfstack import hookimpl
from perfstack.machine.envinfo import with_plugins
from perfstack.plugin.backend import Backend
from perfstack.plugin.load import load_plugins
from perfstack.report import Layer
from tests.conftest import WORKLOADS, Result, backend


class _Named(Backend):
    layers = (Layer.PYTHON,)

    def __init__(self, name: str) -> None:
        self.name = name  # type: ignore[misc]


class _Provides:
    def __init__(self, *items: Any) -> None:
        self.items = items

    @hookimpl
    def perfstack_backends(self) -> list[Any]:
        return list(self.items)


class _EnvPlugin:
    @hookimpl
    def perfstack_environment(self) -> dict[str, Any]:
        return {"mine": {"answer": 42}}


class _BrokenEnv:
    @hookimpl
    def perfstack_environment(self) -> dict[str, Any]:
        raise RuntimeError("no driver")


def test_builtin_backends_come_from_entry_points(plugins):
    backends, failures = plugins.backends()
    assert failures == []
    entry = backends["resources"]
    assert entry.plugin == "resources"  # the entry-point name, as for any third party
    assert entry.package is not None and entry.package.startswith("perfstack ")


def test_disabling_and_autoload(monkeypatch):
    assert "resources" not in load_plugins(disabled=["resources"]).backends()[0]
    monkeypatch.setenv("PERFSTACK_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert load_plugins().backends()[0] == {}
    monkeypatch.delenv("PERFSTACK_DISABLE_PLUGIN_AUTOLOAD")
    monkeypatch.setenv("PERFSTACK_DISABLE_PLUGINS", "resources")
    assert "resources" not in load_plugins().backends()[0]


def test_plugins_env_loads_modules(monkeypatch):
    monkeypatch.setenv("PERFSTACK_PLUGINS", "tests.testplugins.boom")
    assert "boom" in load_plugins().backends()[0]


def test_bad_backend_descriptors_are_reported_not_fatal():
    plugins = load_plugins(autoload=False, extra=[
        ("good", _Provides(_Named("a"))),
        ("dup", _Provides(_Named("a"))),
        ("junk", _Provides("not a backend", _Named(""), _Named("x,y"))),
    ])
    backends, failures = plugins.backends()
    assert list(backends) == ["a"] and backends["a"].plugin == "good"
    problems = {f.plugin: [] for f in failures}
    for f in failures:
        problems[f.plugin].append(f.error)
    assert "also provided by good" in problems["dup"][0]
    assert len(problems["junk"]) == 3


def test_call_each_isolates_plugins():
    plugins = load_plugins(autoload=False, extra=[("env", _EnvPlugin()),
                                                  ("broken", _BrokenEnv())])
    answers = {a.plugin: a for a in plugins.call_each("perfstack_environment")}
    assert answers["env"].result == {"mine": {"answer": 42}}
    assert answers["broken"].result is None and "RuntimeError: no driver" in answers["broken"].error


def test_environment_hook_reaches_the_report(tmp_path, monkeypatch):
    from perfstack.plugin.backend import Workload
    from perfstack.report.files import schema_errors
    from perfstack.run.driver import Session
    from perfstack.run.options import RunOptions
    from tests.conftest import WORKLOADS

    monkeypatch.chdir(tmp_path)
    plugins = load_plugins(extra=[("env", _EnvPlugin()), ("broken", _BrokenEnv())])
    backends, _ = plugins.backends()
    session = Session(Workload(str(WORKLOADS / "busy.py")), [backends["resources"]], plugins,
                      tmp_path / "run", tmp_path, RunOptions(repeat=1, warmup=0))
    report = session.execute()
    assert report.environment["mine"] == {"answer": 42}
    assert "RuntimeError" in report.environment["plugin_errors"]["broken"]
    assert report.environment["cpu"]["logical_cpus"] >= 1
    assert "python_version" in report.environment["pyperf"]
    assert schema_errors(report.to_dict()) == []


def test_plugins_for_other_hook_versions_are_refused_in_one_line(
        perfstack: Callable[..., Result]) -> None:
    """An old hook version, a hook this perfstack lacks, or an argument it does not pass:
    each plugin is refused with one line naming the version; the rest keeps working."""
    expected = {"old_hooks": "written for perfstack hook version 0",
                "unknown_hook": "perfstack_collect_gpu_counters, which is not a hook",
                "renamed_hook": "written for another perfstack hook version"}
    for module, words in expected.items():
        result = perfstack("-p", f"tests.testplugins.{module}", "plugins",
                           env={"COLUMNS": "300"})
        assert result.code == 0, result.stderr
        broken = [line for line in result.stdout.splitlines() if "is broken" in line]
        assert len(broken) == 1 and words in broken[0], result.stdout
        assert "Traceback" not in result.stdout + result.stderr
    result = perfstack("-p", "tests.testplugins.old_hooks", "run", "--plugins", "resources",
                       "--repeat", "1", "--warmup", "0", "-q", str(WORKLOADS / "busy.py"))
    assert result.code == 0, result.stderr


def test_a_collect_step_that_hangs_is_bounded(perfstack: Callable[..., Result]) -> None:
    """A plugin stuck in collect() fails after --collect-timeout; the others are intact."""
    result = perfstack("-p", "tests.testplugins.stuck", "run", "--plugins", "stuck,resources",
                       "--collect-timeout", "1", "--repeat", "1", "--warmup", "0", "-q",
                       str(WORKLOADS / "busy.py"), timeout=60)
    assert result.code == 0, result.stderr
    report = result.report()
    stuck = backend(report, "stuck")
    assert stuck["status"] == "failed" and "did not finish within 1 s" in stuck["reason"]
    assert backend(report, "resources")["status"] == "ok"
    assert any(r["source"] == "resources" for r in report["layers"]["hardware"])


def test_plugins_says_what_runs_by_default(perfstack: Callable[..., Result]) -> None:
    """`perfstack plugins`: default or opt-in, available or not with why; --json for scripts."""
    listed = perfstack("plugins", "--json")
    assert listed.code == 0, listed.stderr
    data = json.loads(listed.stdout)
    by_name = {b["name"]: b for b in data["backends"]}
    assert by_name["resources"]["default"] is True and by_name["resources"]["available"]
    assert by_name["gil"]["default"] is False and by_name["valuepatterns"]["default"] is False
    for b in data["backends"]:
        assert b["available"] or b["reason"], b
    text = perfstack("plugins", env={"COLUMNS": "80"})
    assert text.code == 0, text.stderr
    assert all(len(line) <= 80 for line in text.stdout.splitlines())
    gil = next(line for line in text.stdout.splitlines() if line.strip().startswith("gil "))
    assert "opt-in" in gil
    # who can look into a process perfstack did not start, and who records on demand
    assert by_name["pyspy"]["attach"] and not by_name["torch"]["attach"]
    assert by_name["torch"]["on_demand"] and not by_name["pyspy"]["on_demand"]
    assert "  attach to a running process (perfstack attach): pyspy" in text.stdout
    assert "  record on demand (run --on-demand, then perfstack capture): torch" in text.stdout


class _RaisesEverywhere:
    """A plugin whose every hook but the backends raises."""

    @hookimpl
    def perfstack_environment(self) -> dict[str, Any]:
        raise RuntimeError("environment boom")

    @hookimpl
    def perfstack_renderers(self) -> list[Any]:
        raise RuntimeError("renderers boom")

    @hookimpl
    def perfstack_findings(self, report: Any) -> list[Any]:
        raise RuntimeError("rules boom")


def test_every_hook_call_goes_through_pluggy_and_every_failure_is_a_finding() -> None:
    """One place calls hooks, each plugin alone through pluggy's call loop (so pluggy's call
    monitoring sees it), with one policy: a hook that raises is a plugin-error finding with
    its traceback, and the other plugins still answer."""
    from perfstack.report.files import load_report
    from tests.conftest import ROOT

    plugins = load_plugins(extra=[("broken", _RaisesEverywhere())])
    calls: list[tuple[str, list[str]]] = []
    plugins.pm.add_hookcall_monitoring(
        lambda name, impls, kwargs: calls.append((name, [i.plugin_name for i in impls])),
        lambda outcome, name, impls, kwargs: None)
    env = with_plugins(plugins)
    assert "perf" in env and "broken" in env["plugin_errors"]
    assert "text" in plugins.renderers() and "html" in plugins.renderers()
    found = plugins.findings(load_report(ROOT / "tests/fixtures/reports/v1-busy.json"))
    errors = {f.title: f for f in found if f.rule == "perfstack.plugin-error"}
    assert sorted(errors) == [
        "the environment facts of plugin broken failed (perfstack_environment raised)",
        "the finding rules of plugin broken failed (perfstack_findings raised)",
        "the output formats of plugin broken failed (perfstack_renderers raised)"]
    assert all(f.source == "broken" and "boom" in f.evidence[-1] for f in errors.values())
    # Each call held one plugin: the broken one, and every other plugin on its own.
    assert ("perfstack_findings", ["broken"]) in calls
    assert all(len(impls) == 1 for _, impls in calls)
    assert {name for name, _ in calls} >= {"perfstack_environment", "perfstack_renderers",
                                           "perfstack_findings"}


def test_a_backends_check_is_asked_once_and_a_raise_is_an_answer() -> None:
    from dataclasses import dataclass

    from perfstack.plugin.backend import Availability, availability

    asked: list[str] = []

    class Counted(Backend):
        name = "counted"
        layers = (Layer.KERNEL,)

        def check(self) -> Availability:
            asked.append(self.name)
            raise RuntimeError("no device")

    backend_ = Counted()
    first, second = availability(backend_), availability(backend_)
    assert asked == ["counted"] and first is second
    assert not first.ok and "RuntimeError: no device" in (first.reason or "")
    assert first.error is not None and "Traceback" in first.error

    @dataclass
    class Unhashable(Backend):  # eq=True makes it unhashable: asked each time, never an error
        name = "plain"
        layers = (Layer.KERNEL,)
        size: int = 0

    assert availability(Unhashable()).ok


def test_every_plugin_call_says_its_phase_value_or_error() -> None:
    """One helper makes every call into a plugin (as pytest's CallInfo.from_call): what it
    gave or what it raised, with its traceback, its duration and the phase it was made in."""
    from perfstack.plugin.calls import call

    given = call(lambda: 42, "launch")
    assert (given.when, given.value, given.ok, given.error) == ("launch", 42, True, None)

    def broken() -> int:
        raise ValueError("no such trace\nsecond line")

    failed = call(broken, "analyze")
    assert failed.when == "analyze" and not failed.ok and failed.value is None
    assert isinstance(failed.exception, ValueError) and failed.said() == "no such trace"
    assert "Traceback" in (failed.error or "") and "broken" in (failed.error or "")
    assert failed.failure("collect()").startswith("collect() raised:\nTraceback")
    try:
        call(lambda: (_ for _ in ()).throw(KeyboardInterrupt), "attach")
    except KeyboardInterrupt:
        pass  # Ctrl-C is not a plugin's bug: it goes through
    else:
        raise AssertionError("Ctrl-C was swallowed")


class _MarkedByPluggy:
    """A third party's plugin marked with pluggy's own marker, not ``perfstack.hookimpl``."""

    @pluggy.HookimplMarker("perfstack")
    def perfstack_environment(self) -> dict[str, Any]:
        return {"pluggy_marked": True}


class _Early:
    @hookimpl(tryfirst=True)
    def perfstack_environment(self) -> dict[str, Any]:
        return {"early": True}

    @hookimpl(specname="perfstack_renderers")
    def formats(self) -> list[Any]:
        return []


def test_hook_marks_ours_and_pluggys_with_their_options() -> None:
    """``perfstack.hookimpl`` records its options without importing pluggy; the manager
    reads them (tryfirst, specname) and pluggy's own marks alike."""
    plugins = load_plugins(extra=[("pluggy-marked", _MarkedByPluggy()), ("early", _Early())])
    env = with_plugins(plugins)
    assert env["pluggy_marked"] is True and env["early"] is True
    impls = {i.plugin_name: i for i in plugins.pm.hook.perfstack_environment.get_hookimpls()}
    assert impls["early"].tryfirst and not impls["pluggy-marked"].tryfirst
    renderers = {i.plugin_name for i in plugins.pm.hook.perfstack_renderers.get_hookimpls()}
    assert "early" in renderers


def test_a_core_format_is_drawn_without_pluggy(tmp_path, monkeypatch) -> None:
    """A deferred load with a valid plugin cache finds the core's text renderer without
    making pluggy's manager; once the manager is made, the same renderer comes through it."""
    monkeypatch.setenv("PERFSTACK_CACHE_DIR", str(tmp_path))
    load_plugins(defer=True).renderer_names()  # writes the cache, as a first command does
    plugins = load_plugins(defer=True)
    assert plugins.manifest() is not None
    text = plugins.renderer("text")
    assert text is not None and text.name == "text" and plugins._pm is None
    via_pluggy = plugins.renderers(loaded_only=True)["text"]
    assert type(via_pluggy) is type(text) and plugins._pm is not None
