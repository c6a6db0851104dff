"""``@datarecord`` behaves as ``@dataclass`` does for what perfstack uses, without compiling
code when a class is defined (issue 55: compiling ~130 dataclasses' methods was a third of
`perfstack show`'s start). Each behaviour is checked twice: with the shared ``__init__`` a
class starts with, and with the compiled one it gets after ``COMPILE_AFTER`` instances."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle
from types import SimpleNamespace
from typing import ClassVar

import pytest

from perfstack.records import (
    COMPILE_AFTER,
    FrozenRecordError,
    as_dict,
    datarecord,
    field,
    field_names,
    replace,
)


@dataclasses.dataclass
class PointDC:
    """A dataclass to hold ours against."""

    x: float
    y: float = 0.0
    tags: list[str] = dataclasses.field(default_factory=list)
    note: str | None = dataclasses.field(default=None, repr=False, compare=False)
    kind: ClassVar[str] = "point"


def _classes() -> SimpleNamespace:
    """Fresh record classes (each test compiles its own, or not)."""

    @datarecord
    class Point:
        """A mutable record."""

        x: float
        y: float = 0.0
        tags: list[str] = field(default_factory=list)
        note: str | None = field(default=None, repr=False, compare=False)
        kind: ClassVar[str] = "point"

    @datarecord(frozen=True)
    class Key:
        """A frozen record."""

        layer: str
        name: str
        inner: Point | None = None

    @datarecord
    class Checked:
        """A record with a __post_init__ and a method of its own."""

        value: int
        double: int = 0

        def __post_init__(self) -> None:
            self.double = 2 * self.value

        def __repr__(self) -> str:
            return f"<{self.value}>"

    return SimpleNamespace(Point=Point, Key=Key, Checked=Checked)


@pytest.fixture(params=["shared", "compiled"])
def rec(request) -> SimpleNamespace:
    """The record classes with their shared ``__init__``, or after enough instances that
    each has its compiled one."""
    made = _classes()
    if request.param == "compiled":
        for cls, args in ((made.Point, (1.0,)), (made.Key, ("a", "b")), (made.Checked, (1,))):
            shared = cls.__dict__["__init__"]
            for _ in range(COMPILE_AFTER):
                cls(*args)
            assert cls.__dict__["__init__"] is not shared
    return made


def test_construction_matches_dataclasses(rec):
    for args, kwargs in [((1.0,), {}), ((1.0, 2.0), {}), ((1.0,), {"tags": ["a"]}),
                         ((), {"x": 3.0, "y": 4.0, "note": "n"}), ((1.0, 2.0, ["t"], "n"), {})]:
        mine, theirs = rec.Point(*args, **kwargs), PointDC(*args, **kwargs)
        assert repr(mine).replace("_classes.<locals>.Point", "PointDC", 1) == repr(theirs)
        assert (mine.x, mine.y, mine.tags, mine.note) == (theirs.x, theirs.y, theirs.tags,
                                                          theirs.note)
    assert rec.Point(1.0).tags is not rec.Point(1.0).tags  # a factory per instance
    assert field_names(rec.Point) == ("x", "y", "tags", "note")  # the ClassVar is no field
    assert rec.Point.kind == "point"
    assert rec.Point.__match_args__ == ("x", "y", "tags", "note")


@pytest.mark.parametrize("call, named", [
    (lambda P: P(), "'x'"),
    (lambda P: P(1, 2, [], None, 5), "were given"),
    (lambda P: P(1, x=2), "multiple values for argument 'x'"),
    (lambda P: P(1, z=2), "unexpected keyword argument 'z'"),
])
def test_wrong_arguments_are_type_errors(rec, call, named):
    with pytest.raises(TypeError, match=named):
        call(rec.Point)


def test_equality_and_hash(rec):
    P, K = rec.Point, rec.Key
    assert P(1.0, tags=["a"]) == P(1.0, tags=["a"])
    assert P(1.0) != P(2.0) and P(1.0) != PointDC(1.0)
    assert P(1.0, note="a") == P(1.0, note="b")  # compare=False
    nan = math.nan
    assert P(nan) == P(nan) and PointDC(nan) == PointDC(nan)  # the same object
    with pytest.raises(TypeError):
        hash(P(1.0))  # mutable with ==: unhashable, as a dataclass
    assert hash(K("a", "b")) == hash(K("a", "b")) and len({K("a", "b"), K("a", "b")}) == 1
    assert K("a", "b") != K("a", "c")


def test_frozen_records_refuse_changes(rec):
    key = rec.Key("a", "b")
    with pytest.raises(FrozenRecordError):
        key.name = "c"
    with pytest.raises(AttributeError):
        del key.layer
    assert replace(key, name="c") == rec.Key("a", "c") and key.name == "b"


def test_post_init_and_own_methods(rec):
    got = rec.Checked(3)
    assert got.double == 6 and repr(got) == "<3>"
    assert rec.Checked(value=4).double == 8


def test_definitions_refused_as_dataclasses_refuses_them():
    with pytest.raises(ValueError, match="default_factory"):
        @datarecord
        class Shared:
            items: list[int] = []  # noqa: RUF012
    with pytest.raises(TypeError, match="follows one with a default"):
        @datarecord
        class Order:
            a: int = 0
            b: int


def test_the_standard_library_reads_records(rec):
    """The plugin API hands records out; dataclasses' functions keep working on them."""
    point = rec.Point(1.0, 2.0, ["t"], "n")
    assert dataclasses.is_dataclass(point) and dataclasses.is_dataclass(rec.Point)
    assert [f.name for f in dataclasses.fields(point)] == ["x", "y", "tags", "note"]
    changed = dataclasses.replace(point, y=5.0)
    assert isinstance(changed, rec.Point) and changed.y == 5.0 and changed.tags == ["t"]
    nested = rec.Key("a", "b", point)
    assert dataclasses.asdict(nested) == as_dict(nested) == {
        "layer": "a", "name": "b", "inner": {"x": 1.0, "y": 2.0, "tags": ["t"], "note": "n"}}


def test_records_pickle_and_copy():
    """Folds travel between processes pickled (module-level classes, as perfstack's)."""
    from perfstack.report import Quantity, Row

    row = Row("k", "name", "src", {"time": Quantity(1.5, "s")}, {"a": 1})
    for twin in (pickle.loads(pickle.dumps(row)), copy.deepcopy(row), copy.copy(row)):
        assert twin == row and type(twin) is Row
    assert pickle.loads(pickle.dumps(Quantity(None, "s", "not measured"))).reason
