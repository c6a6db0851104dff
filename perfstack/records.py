"""Plain data classes that compile nothing when defined: ``@datarecord`` and ``field``.

The report's model, its views and the run's state are small classes of named fields. The
standard library's ``dataclasses`` writes each class's ``__init__``, ``__repr__``, ``__eq__``
(and, frozen, ``__setattr__``, ``__delattr__``, ``__hash__``) as source and compiles it when
the class is defined: with ~130 such classes, a third of `perfstack show`'s start went to
compiling code and importing ``inspect`` (docs/performance.md, issue 55). ``@datarecord`` gives
the same behaviour with shared functions that read the class's field table instead:

- ``__init__(*args, **kwargs)`` in field order, defaults and ``field(default_factory=...)``,
  then ``__post_init__`` where the class has one; ``__repr__`` as ``Name(a=1, b='x')``;
  ``__eq__`` between instances of the same class over the compared fields; frozen records
  refuse ``setattr``/``delattr`` (:class:`FrozenRecordError`) and hash by their fields,
  mutable ones are unhashable; a method the class defines itself is kept.
- A class made often (``COMPILE_AFTER`` instances: a big report's rows and quantities) then
  gets an ``__init__`` written for its fields and compiled, as fast as a dataclass's; the
  rest never compile anything.
- Type checkers read ``@datarecord`` as a dataclass (``typing.dataclass_transform``).
- ``dataclasses.replace``, ``fields``, ``asdict`` and ``is_dataclass`` accept records (the
  plugin API hands them out): ``__dataclass_fields__`` is built, with ``dataclasses``, the
  first time it is asked for. :func:`replace` and :func:`field_names` here need no import.

Records pickle and copy as any plain object (their state is their ``__dict__``).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")
C = TypeVar("C", bound=type)

#: the attribute that holds a record class's fields (name -> :class:`Field`), in order
FIELDS = "__record_fields__"


class _Missing:
    """The marker for "no default"."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class FrozenRecordError(AttributeError):
    """Raised on assigning to, or deleting, a field of a frozen record."""


class Field:
    """One field of a record: its name, its default or default factory, and whether it is
    shown in ``repr`` and compared by ``==``."""

    __slots__ = ("compare", "default", "default_factory", "name", "repr", "type")

    def __init__(self, default: Any = MISSING, default_factory: Any = MISSING,
                 repr: bool = True, compare: bool = True) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("a field takes a default or a default_factory, not both")
        self.name = ""
        self.type: Any = None
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r})"


@overload
def field(*, default: T, repr: bool = True, compare: bool = True) -> T: ...
@overload
def field(*, default_factory: Callable[[], T], repr: bool = True,
          compare: bool = True) -> T: ...
@overload
def field(*, repr: bool = True, compare: bool = True) -> Any: ...
def field(*, default: Any = MISSING, default_factory: Any = MISSING,
          repr: bool = True, compare: bool = True) -> Any:
    """Describe a record's field: its ``default`` or a ``default_factory`` called for each
    new instance (for lists and dicts), and whether ``repr`` shows it and ``==`` compares it."""
    return Field(default, default_factory, repr, compare)


def _is_classvar(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _fields_of(cls: type) -> dict[str, Field]:
    """The fields of ``cls``: its bases' records' first, then its own annotations in order."""
    found: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        found.update(base.__dict__.get(FIELDS, {}))
    own = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 (inspect costs the start)
    for name, annotation in own.items():
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, MISSING)
        spec = value if isinstance(value, Field) else Field(default=value)
        if isinstance(value, Field):
            if value.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, value.default)
        if spec.default_factory is MISSING and isinstance(spec.default, (list, dict, set)):
            raise ValueError(f"{cls.__qualname__}.{name}: a mutable default is shared by "
                             "every instance; use field(default_factory=...)")
        spec.name, spec.type = name, annotation
        found[name] = spec
    seen_default = False
    for spec in found.values():
        if spec.default is not MISSING or spec.default_factory is not MISSING:
            seen_default = True
        elif seen_default:
            raise TypeError(f"{cls.__qualname__}: field {spec.name!r} without a default "
                            "follows one with a default")
    return found


#: constructions of a record class after which it gets a compiled ``__init__``
COMPILE_AFTER = 64


def _make_init(cls: type, fields: dict[str, Field]) -> Callable[..., None]:
    """The shared ``__init__``: it reads the field table on each call, and, on the class's
    ``COMPILE_AFTER``-th instance, puts a compiled one in its place (``_compiled_init``),
    so that the few classes made by the ten thousand (a big report's rows and quantities)
    are made as fast as a dataclass's, and the many made a few times compile nothing."""
    names = tuple(fields)
    known = frozenset(names)
    count = len(names)
    required = tuple(f.name for f in fields.values()
                     if f.default is MISSING and f.default_factory is MISSING)
    defaults = tuple((f.name, f.default) for f in fields.values() if f.default is not MISSING)
    factories = tuple((f.name, f.default_factory) for f in fields.values()
                      if f.default_factory is not MISSING)
    post_init = hasattr(cls, "__post_init__")
    title = cls.__qualname__
    made = [0]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        made[0] += 1
        if made[0] == COMPILE_AFTER and cls.__dict__.get("__init__") is __init__:
            type.__setattr__(cls, "__init__", _compiled_init(cls, fields))
        given = dict(zip(names, args, strict=False)) if args else {}
        if len(args) > count:
            raise TypeError(f"{title}() takes {count} positional arguments but "
                            f"{len(args)} were given")
        if kwargs:
            if args and not kwargs.keys().isdisjoint(given):
                twice = next(n for n in names if n in kwargs and n in given)
                raise TypeError(f"{title}() got multiple values for argument {twice!r}")
            if not kwargs.keys() <= known:
                stray = next(k for k in kwargs if k not in known)
                raise TypeError(f"{title}() got an unexpected keyword argument {stray!r}")
            given.update(kwargs)
        if len(given) < count:
            for name, default in defaults:
                if name not in given:
                    given[name] = default
            for name, factory in factories:
                if name not in given:
                    given[name] = factory()
            if len(given) < count:
                lacking = [n for n in required if n not in given]
                raise TypeError(f"{title}() missing required argument: {lacking[0]!r}")
        self.__dict__.update(given)
        if post_init:
            self.__post_init__()

    return __init__


def _compiled_init(cls: type, fields: dict[str, Field]) -> Callable[..., None]:
    """An ``__init__`` written for ``cls``'s fields and compiled, as ``dataclasses`` writes
    one: its arguments by name, defaults as the function's defaults, a factory called when
    its argument is not given."""
    env: dict[str, Any] = {"_record_missing": MISSING}
    params, lines, defaults = [], [], []
    for f in fields.values():
        params.append(f.name)
        if f.default_factory is not MISSING:
            env[f"_record_factory_{f.name}"] = f.default_factory
            defaults.append(MISSING)
            lines.append(f"_record_values[{f.name!r}] = _record_factory_{f.name}() "
                         f"if {f.name} is _record_missing else {f.name}")
        else:
            if f.default is not MISSING:
                defaults.append(f.default)
            lines.append(f"_record_values[{f.name!r}] = {f.name}")
    if hasattr(cls, "__post_init__"):
        lines.append("_record_self.__post_init__()")
    source = (f"def __init__(_record_self, {', '.join(params)}):\n"
              "    _record_values = _record_self.__dict__\n"
              + "".join(f"    {line}\n" for line in lines))
    space: dict[str, Any] = {}
    exec(compile(source, f"<record {cls.__qualname__}>", "exec"), env, space)
    init: Any = space["__init__"]
    init.__defaults__ = tuple(defaults) or None
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init  # type: ignore[no-any-return]


def _make_repr(fields: dict[str, Field]) -> Callable[[Any], str]:
    shown = tuple(f.name for f in fields.values() if f.repr)

    def __repr__(self: Any) -> str:
        values = self.__dict__
        inner = ", ".join(f"{name}={values[name]!r}" for name in shown)
        return f"{type(self).__qualname__}({inner})"

    return __repr__


def _getter(names: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """A function from an instance's ``__dict__`` to the tuple of ``names``' values (as a
    tuple, so that ``==`` on it takes an identical value as equal, NaN included, as
    ``dataclasses`` does)."""
    if len(names) > 1:
        return itemgetter(*names)
    if names:
        (only,) = names
        return lambda values: (values[only],)
    return lambda values: ()


def _make_eq(compared: tuple[str, ...]) -> Callable[[Any, object], bool]:
    get = _getter(compared)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return bool(get(self.__dict__) == get(other.__dict__))

    return __eq__


def _make_hash(compared: tuple[str, ...]) -> Callable[[Any], int]:
    get = _getter(compared)

    def __hash__(self: Any) -> int:
        return hash(get(self.__dict__))

    return __hash__


def _frozen_methods(cls: type, fields: dict[str, Field]) -> tuple[Callable[..., None],
                                                                 Callable[..., None]]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in fields:
            raise FrozenRecordError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in fields:
            raise FrozenRecordError(f"cannot delete field {name!r}")
        object.__delattr__(self, name)

    return __setattr__, __delattr__


class _DataclassFields:
    """``__dataclass_fields__`` made with ``dataclasses`` on first use, so that the standard
    library's functions read a record as they read a dataclass."""

    def __get__(self, instance: object, owner: type) -> dict[str, Any]:
        made: dict[str, Any] | None = owner.__dict__.get("__made_dataclass_fields__")
        if made is None:
            import dataclasses

            specs = []
            for f in getattr(owner, FIELDS).values():
                kw: dict[str, Any] = {"repr": f.repr, "compare": f.compare}
                if f.default is not MISSING:
                    kw["default"] = f.default
                if f.default_factory is not MISSING:
                    kw["default_factory"] = f.default_factory
                specs.append((f.name, f.type, dataclasses.field(**kw)))
            twin = dataclasses.make_dataclass(owner.__name__, specs, namespace={})
            made = getattr(twin, "__dataclass_fields__")  # noqa: B009
            type.__setattr__(owner, "__made_dataclass_fields__", made)
        return made


def _add(cls: type, name: str, value: object) -> None:
    """Set ``name`` unless the class itself defines it (its own method wins)."""
    if name not in cls.__dict__:
        setattr(cls, name, value)


@overload
@dataclass_transform(field_specifiers=(field, Field))
def datarecord(cls: C, /) -> C: ...
@overload
def datarecord(*, frozen: bool = False) -> Callable[[C], C]: ...
def datarecord(cls: Any = None, /, *, frozen: bool = False) -> Any:
    """Make ``cls`` a record: ``__init__``, ``__repr__``, ``__eq__`` (and, ``frozen``,
    immutability and ``__hash__``) from its annotated fields, as ``@dataclass`` would."""

    def wrap(klass: C) -> C:
        fields = _fields_of(klass)
        type.__setattr__(klass, FIELDS, fields)
        compared = tuple(f.name for f in fields.values() if f.compare)
        own_hash = "__hash__" in klass.__dict__ and not (
            klass.__dict__["__hash__"] is None and "__eq__" in klass.__dict__)
        _add(klass, "__init__", _make_init(klass, fields))
        _add(klass, "__repr__", _make_repr(fields))
        _add(klass, "__eq__", _make_eq(compared))
        if frozen:
            setter, deleter = _frozen_methods(klass, fields)
            if "__setattr__" in klass.__dict__ or "__delattr__" in klass.__dict__:
                raise TypeError(f"{klass.__qualname__}: a frozen record sets its own "
                                "__setattr__/__delattr__")
            type.__setattr__(klass, "__setattr__", setter)
            type.__setattr__(klass, "__delattr__", deleter)
        if not own_hash:
            type.__setattr__(klass, "__hash__", _make_hash(compared) if frozen else None)
        type.__setattr__(klass, "__match_args__", tuple(fields))
        type.__setattr__(klass, "__dataclass_fields__", _DataclassFields())
        return klass

    return wrap if cls is None else wrap(cls)


def field_names(cls_or_record: object) -> tuple[str, ...]:
    """The names of a record's (or record class's) fields, in order."""
    return tuple(getattr(cls_or_record, FIELDS))


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the record ``obj`` with ``changes`` to some of its fields."""
    values = {name: obj.__dict__[name] for name in getattr(obj, FIELDS)}
    values.update(changes)
    return type(obj)(**values)


def as_dict(obj: object) -> Any:
    """A record as plain data: records become dicts of their fields, and lists, tuples and
    dicts are copied with their items converted (as ``dataclasses.asdict``)."""
    if hasattr(type(obj), FIELDS):
        return {name: as_dict(value) for name, value in
                ((n, obj.__dict__[n]) for n in getattr(obj, FIELDS))}
    if isinstance(obj, list):
        return [as_dict(v) for v in obj]
    if isinstance(obj, tuple):
        items = [as_dict(v) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, dict):
        return type(obj)((as_dict(k), as_dict(v)) for k, v in obj.items())
    return obj
