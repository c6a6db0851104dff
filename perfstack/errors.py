"""Exceptions perfstack's library code raises; only the CLI turns them into messages and codes."""

from __future__ import annotations


class PerfstackError(Exception):
    """Base class: the message is one line a user can act on."""


class UsageError(PerfstackError):
    """An option or argument is out of range or inconsistent."""


class InputNotFound(PerfstackError):
    """A file the user named (workload script, module, report) does not exist."""


class UnknownPlugin(PerfstackError):
    """A backend named on the command line is not installed."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        listing = ", ".join(known) if known else "none"
        super().__init__(f"unknown plugin {name!r} (installed: {listing}; see 'perfstack plugins')")


class PluginModuleNotFound(UnknownPlugin):
    """A module named with ``-p MODULE`` cannot be found."""

    def __init__(self, module: str) -> None:
        PerfstackError.__init__(self, f"-p {module}: no module named {module!r} (is it "
                                "installed, and importable from here?)")
        self.name = module
        self.known = []


class NotAReport(PerfstackError):
    """A file is not JSON, not a perfstack report, or does not match the report schema."""


class UnsupportedVersion(PerfstackError):
    """A perfstack report of a schema version this perfstack cannot read."""

    def __init__(self, path: str, version: object, supported: int) -> None:
        self.version = version
        super().__init__(
            f"{path}: report schema version {version!r} is not supported "
            f"(this perfstack reads versions 1 to {supported}); "
            + ("upgrade perfstack to read it" if isinstance(version, int) and version > supported
               else "it is not a version perfstack ever wrote")
        )


class NewerHistory(PerfstackError):
    """A history database written by a newer perfstack: read by none, changed by none."""


class OutputError(PerfstackError):
    """A report or artifact folder cannot be written."""


class HistoryUnavailable(PerfstackError):
    """The history database cannot be opened, read or written (a server that does not answer,
    a file that is not a database)."""


class MissingDependency(PerfstackError):
    """A command needs a package that is not installed."""


class ClusterUnavailable(PerfstackError):
    """The Dask scheduler the command was pointed at cannot be reached."""


class AttachRefused(PerfstackError):
    """The process named cannot be looked into: the kernel refuses (another user's process,
    ptrace restricted, a container without the capability)."""
