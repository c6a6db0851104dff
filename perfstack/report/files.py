"""Reading, writing and validating report files.

Writes go to a temporary name in the same folder and are renamed into place, so a reader
never sees half a report and a failed write never clobbers the previous one. Names ending
in ``.gz`` are compressed and decompressed transparently.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import stat
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from perfstack.errors import InputNotFound, NotAReport, OutputError, UnsupportedVersion
from perfstack.report import SCHEMA_NAME, SCHEMA_VERSION, Report
from perfstack.report.checking import PartCheck, schema_bytes
from perfstack.report.checking import schema as schema
from perfstack.report.checking import schema_errors as schema_errors
from perfstack.report.encode import finite as finite
from perfstack.report.encode import report_json as report_json
from perfstack.report.encode import report_pieces, strict_json
from perfstack.report.encode import utf8_safe as utf8_safe


def _open_text(path: Path, mode: str) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")


#: Above this size a report is parsed by msgspec: 1.5x faster than the standard library on
#: a 10 MB report, but its import (~18 ms) costs more than it saves on a small one.
BIG_JSON = 2 << 20


def read_json(path: Path) -> Any:
    """Return the parsed JSON in ``path`` (``.gz`` aware); raise NotAReport if it is not JSON.

    NaN, Infinity and numbers beyond a float's range are not JSON any reader accepts: refused."""
    return _read(path)[0]


def _read(path: Path) -> tuple[Any, bytes | None]:
    """The parsed JSON in ``path``, and its bytes when it is a plain file."""
    if not path.is_file():
        raise InputNotFound(f"{path}: no such file")
    try:
        if path.suffix != ".gz":
            raw = path.read_bytes()
            if len(raw) > BIG_JSON:
                return _read_big(raw), raw
            return json.loads(raw.decode("utf-8"), parse_constant=_no_constants), raw
        with _open_text(path, "r") as fh:
            return json.load(fh, parse_constant=_no_constants), None
    except (ValueError, UnicodeDecodeError, gzip.BadGzipFile, EOFError, zlib.error) as exc:
        # ValueError: not JSON, NaN or Infinity, an integer longer than Python reads
        raise NotAReport(f"{path}: not valid JSON ({str(exc)[:200]})") from None
    except RecursionError:
        raise NotAReport(f"{path}: not valid JSON (nested too deeply to read)") from None
    except OSError as exc:
        raise NotAReport(f"{path}: cannot be read ({exc.strerror or exc})") from None


def _read_big(raw: bytes) -> Any:
    import msgspec

    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ValueError(str(exc)) from None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    # Version 2 added the run role "extra" (a backend's further runs, such as the gil
    # backend's thread sweep) and more environment facts; every v1 report is a valid v2 one.
    return {**data, "version": 2}


def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    # Version 3 added the machine-speed probe of each run and the pairing of `perfstack ab`
    # reports, both optional: a v2 report is a v3 one without them.
    return {**data, "version": 3}


#: Migrations from each older schema version to the next; applied in order on read.
MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3}


def migrate(data: dict[str, Any], path: str) -> dict[str, Any]:
    """Return ``data`` migrated to the current schema version, or raise UnsupportedVersion."""
    version = data.get("version")
    if version == SCHEMA_VERSION:
        return data
    if not isinstance(version, int) or isinstance(version, bool) or version > SCHEMA_VERSION \
            or version not in MIGRATIONS:
        raise UnsupportedVersion(path, version, SCHEMA_VERSION)
    while data.get("version") != SCHEMA_VERSION:
        data = MIGRATIONS[data["version"]](data)
    return data


def check_report_data(data: Any, path: str) -> dict[str, Any]:
    """Return ``data`` migrated to the current version; raise NotAReport or UnsupportedVersion
    unless it is a valid report."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_NAME:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise NotAReport(f"{path}: not a perfstack report (schema is {found!r})")
    migrated = migrate(dict(data), path)
    errors = schema_errors(migrated)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise NotAReport(f"{path}: does not match the report schema: {errors[0]}{more}")
    return migrated


def read_report_data(path: Path, trust_written: bool = False) -> dict[str, Any]:
    """Return the JSON of the report in ``path``, checked against the schema and migrated to
    the current version, without building the report's objects (``perfstack validate``).

    ``trust_written``: a report (a plain file) whose exact bytes perfstack wrote and checked
    against this schema as it wrote them (``save_report``) is not checked again; any other
    file, or any change to it, is."""
    data, raw = _read(path)
    if (trust_written and raw is not None and isinstance(data, dict)
            and data.get("schema") == SCHEMA_NAME and data.get("version") == SCHEMA_VERSION
            and _fingerprint(raw) in _checked()):
        return data
    return check_report_data(data, str(path))


def load_report(path: Path) -> Report:
    """Return the report stored in ``path``, checked against the schema and its version."""
    return Report.from_dict(read_report_data(path, trust_written=True))


def load(path: str | os.PathLike[str]) -> Report:
    """Return the report stored in ``path`` (``.json`` or ``.json.gz``), checked against the
    schema: for notebooks (``perfstack.load``). ``report.records("python")`` gives a layer's
    rows as plain dicts, ``report.dataframe("python")`` as a pandas DataFrame when pandas is
    installed."""
    return load_report(Path(path))


#: How many written reports ``save_report`` remembers as checked.
CHECKED_KEPT = 2000


def _checked_file() -> Path:
    """One file per schema (its version and its text's CRC): a report checked against another
    schema is checked again."""
    from perfstack.cachedir import cache_folder

    crc = zlib.crc32(schema_bytes())
    return cache_folder() / f"checked-reports-v{SCHEMA_VERSION}-{crc:08x}.txt"


def _fingerprint(raw: bytes) -> str:
    # Not a security hash: a file that matches one perfstack wrote by accident would only be
    # read unchecked; its size is part of the key.
    return f"{len(raw)}:{zlib.crc32(raw):08x}"


def _checked() -> set[str]:
    try:
        return set(_checked_file().read_text("utf-8").split())
    except (OSError, UnicodeDecodeError):
        return set()


def _remember(fingerprint: str) -> None:
    """Note that the bytes of this fingerprint (``_fingerprint``) are a report checked
    against the schema (best effort: a cache that cannot be written only means the next read
    checks the file)."""
    path = _checked_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(fingerprint + "\n")
        if path.stat().st_size > CHECKED_KEPT * 16:  # "size:crc32\n", about 16 characters
            kept = path.read_text("utf-8").split()[-CHECKED_KEPT // 2:]
            write_text_atomic(path, "".join(f"{k}\n" for k in kept))
    except (OSError, OutputError, UnicodeDecodeError):
        pass


def write_atomic(path: Path, data: bytes | Iterable[bytes]) -> None:
    """Write ``data`` (bytes, or its pieces in order) to ``path`` via a temporary file and a
    rename (gzip when it ends .gz).

    A path that exists and is not a regular file (a device such as /dev/null or /dev/stdout,
    a FIFO), or lies in /dev or /proc (/dev/stdout redirected to a file), is written through,
    never replaced by a file; a folder is refused."""
    if path.exists() and (not path.is_file()
                          or str(path.absolute()).startswith(("/dev/", "/proc/"))):
        _write_through(path, data)
        return
    folder = path.parent if str(path.parent) else Path(".")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        import tempfile  # lazy: reading a report writes nothing

        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write here ({exc.strerror})") from None
    try:
        # mkstemp makes the file 0600; give it the mode a plain open() would (the umask's), or
        # the mode of the file it replaces.
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.is_file() else _umask_mode())
        with os.fdopen(fd, "wb") as raw:
            if path.suffix == ".gz":
                with gzip.GzipFile(fileobj=raw, mode="wb") as gz:
                    _write_pieces(gz.write, data)
            else:
                _write_pieces(raw.write, data)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OutputError(f"{path}: cannot write ({exc.strerror})") from None
        raise


#: How long a FIFO named as an output is waited for a reader (in steps a signal can end).
FIFO_WAIT_S = 5.0


def _no_signal() -> bool:
    return False


#: Whether a signal postponed while the report is written asks the FIFO wait to stop now;
#: set by the command line (perfstack.signals.pending), which this layer does not import.
stop_waiting: Callable[[], bool] = _no_signal


def _open_fifo(path: Path) -> int:
    """Open a FIFO for writing once something reads it: a plain open() would block for ever,
    deaf to Ctrl-C, when nothing ever does."""
    import fcntl
    import time

    deadline = time.monotonic() + FIFO_WAIT_S
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
            if stop_waiting():
                raise OutputError(f"{path}: a signal came while waiting for the FIFO's "
                                  "reader") from None
            if time.monotonic() > deadline:
                raise OutputError(f"{path}: a FIFO that nothing reads (waited "
                                  f"{FIFO_WAIT_S:.0f} s for a reader)") from None
            time.sleep(0.05)
            continue
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return fd


def _write_pieces(write: Callable[[bytes], object], data: bytes | Iterable[bytes]) -> None:
    if isinstance(data, bytes):
        write(data)
        return
    for piece in data:
        write(piece)


def _write_through(path: Path, data: bytes | Iterable[bytes]) -> None:
    if path.is_dir():
        raise OutputError(f"{path}: is a folder; give a file name")
    try:
        fd = _open_fifo(path) if stat.S_ISFIFO(path.stat().st_mode) else os.open(
            path, os.O_WRONLY | os.O_TRUNC)
        with open(fd, "wb") as fh:
            if path.suffix == ".gz":
                with gzip.GzipFile(fileobj=fh, mode="wb") as gz:
                    _write_pieces(gz.write, data)
            else:
                _write_pieces(fh.write, data)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror})") from None


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically."""
    write_atomic(path, strict_json(data)[1])


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, as UTF-8 (``utf8_safe``)."""
    write_atomic(path, utf8_safe(text).encode("utf-8"))


def save_report(report: Report, path: Path) -> None:
    """Write ``report`` to ``path`` atomically, a piece at a time (``report_pieces``), each
    part checked against the schema as it is written; a plain file whose every part passed
    is remembered as checked, so that reading it back (``show``, ``diff``) need not check it
    again, nor load the schema's validator."""
    check = PartCheck()
    write_atomic(path, check.pieces(report_pieces(report, check.seen)))
    if path.suffix != ".gz" and check.valid and path.is_file():
        _remember(f"{check.size}:{check.crc:08x}")
