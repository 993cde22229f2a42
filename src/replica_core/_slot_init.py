"""A cheaper ``__init__`` for frozen slots dataclasses: fields stored as in a mutable class.

A frozen dataclass's generated ``__init__`` cannot assign ``self.x = x`` (its ``__setattr__``
raises ``FrozenInstanceError``), so it stores every field with ``object.__setattr__(self, "x",
x)``: a generic call per field. A plain ``self.x = x`` on a class whose ``__setattr__`` is
``object``'s is the interpreter's cheapest store (CPython specialises it into a direct slot
write). :func:`slot_init` therefore gives each class a private *builder*: a subclass that adds
no slots (same memory layout) and has ``object``'s ``__setattr__``/``__delattr__``. The new
``__init__`` evaluates every value first (arguments, defaults, ``default_factory``), turns the
instance into a builder (``__class__`` assignment), stores the fields with plain assignments and
turns it back into ``cls`` before anything else can see it. The two class changes together cost
about one ``object.__setattr__`` call, a plain store a twentieth of one.

Everything else stays the dataclass's own: fields, defaults and ``default_factory``,
keyword-only fields, ``__post_init__`` (run on the finished, frozen instance),
``__eq__``/``__hash__``/``__repr__``, pickling, ``dataclasses.replace``; assigning or deleting a
field afterwards still raises ``FrozenInstanceError``. An instance of a subclass that inherits
this ``__init__`` is built by the dataclass's own ``__init__`` (the builder is ``cls``'s alone).

Replication builds several of these per message (fetch requests and their partitions, fetch
responses, produce answers, fetch states), so construction is on the per-message path.
"""
from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["dataclass_init", "slot_init", "slot_init_classes"]

T = TypeVar("T", bound=type)


class _Factory:
    """The default of a parameter whose field has a ``default_factory`` (as in dataclasses)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()

_SET_CLASS: Callable[[object, type], None] = object.__dict__["__class__"].__set__
"""Assigns an object's class without its own ``__setattr__`` (frozen: it would refuse)."""

_DATACLASS_INIT: dict[type, Callable[..., None]] = {}
"""Every class :func:`slot_init` was applied to -> the ``__init__`` dataclasses generated."""


def slot_init(cls: T) -> T:
    """Give the frozen slots dataclass ``cls`` an ``__init__`` that stores its fields while the
    instance is briefly ``cls``'s mutable builder (apply above ``@dataclass(frozen=True,
    slots=True)``); returns ``cls``.

    Raises ``TypeError`` for a class this does not fit: not a frozen dataclass, one with its own
    ``__init__`` (``init=False``), a field with no slot, or an ``InitVar`` (its generated
    ``__init__`` takes parameters that are not fields).
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"slot_init needs a dataclass, got {cls!r}")
    if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"slot_init is for frozen dataclasses ({cls.__qualname__} is not: a "
                        "plain slots dataclass already assigns its fields directly)")
    if not cls.__dataclass_params__.init:  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__qualname__} writes its own __init__ (init=False)")
    fields = dataclasses.fields(cls)
    for f in fields:
        descr = next((k.__dict__[f.name] for k in cls.__mro__ if f.name in k.__dict__), None)
        if not isinstance(descr, types.MemberDescriptorType):
            raise TypeError(f"{cls.__qualname__}.{f.name} is not a slot (use slots=True)")
        if f.name == "self" or f.name.startswith("_si_"):
            raise TypeError(f"{cls.__qualname__}.{f.name}: field name reserved by slot_init")
    init_fields = [f for f in fields if f.init]
    original = cls.__init__
    params = list(original.__code__.co_varnames[1:original.__code__.co_argcount
                                                + original.__code__.co_kwonlyargcount])
    if sorted(params) != sorted(f.name for f in init_fields):
        raise TypeError(f"{cls.__qualname__}: __init__ parameters {params} are not its init "
                        "fields (InitVar pseudo-fields are not supported)")

    builder = type(cls.__name__, (cls,), {
        "__slots__": (), "__setattr__": object.__setattr__, "__delattr__": object.__delattr__,
        "__module__": cls.__module__, "__qualname__": f"{cls.__qualname__}.<builder>"})
    env: dict[str, Any] = {"_si_FACTORY": _FACTORY, "_si_cls": cls, "_si_builder": builder,
                           "_si_set_class": _SET_CLASS, "_si_dataclass_init": original,
                           "_si_type": type}
    positional: list[str] = []
    keyword: list[str] = []
    values: list[str] = []  # evaluated before the class changes: nothing can raise in between
    stores: list[str] = []
    passed: dict[str, str] = {}  # what a subclass's instance hands the dataclass's __init__
    for f in fields:
        n = f.name
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_factory:
            env[f"_si_f_{n}"] = f.default_factory
        if f.init:
            if has_factory:
                param = f"{n}=_si_FACTORY"
                values.append(f"        if {n} is _si_FACTORY:\n            {n} = _si_f_{n}()")
                passed[n] = f"_si_f_{n}() if {n} is _si_FACTORY else {n}"
            elif f.default is not dataclasses.MISSING:
                env[f"_si_d_{n}"] = f.default
                param = f"{n}=_si_d_{n}"
            else:
                param = n
            (keyword if f.kw_only else positional).append(param)
            value = n
        elif has_factory:
            value = f"_si_v_{n}"
            values.append(f"        {value} = _si_f_{n}()")
        elif f.default is not dataclasses.MISSING:
            env[f"_si_d_{n}"] = f.default
            value = f"_si_d_{n}"
        else:
            continue  # init=False without a default: left unset (e.g. for __post_init__)
        stores.append(f"        self.{n} = {value}")
    init_args = ", ".join(f"{n}={passed.get(n, n)}" for n in params)
    body = ["        if _si_type(self) is not _si_cls:",
            f"            return _si_dataclass_init(self, {init_args})",
            *values,
            "        _si_set_class(self, _si_builder)",
            *stores,
            "        self.__class__ = _si_cls"]
    if hasattr(cls, "__post_init__"):
        body.append("        self.__post_init__()")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    names = list(env)
    src = (f"def _si_make({', '.join(names)}):\n"
           f"    def __init__({signature}):\n"
           + "\n".join(body) + "\n"
           "    return __init__\n")
    ns: dict[str, Any] = {}
    exec(src, {}, ns)
    init = ns["_si_make"](**env)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = original.__doc__
    _DATACLASS_INIT[cls] = original
    cls.__init__ = init  # type: ignore[misc]
    return cls


def slot_init_classes() -> tuple[type, ...]:
    """Every class :func:`slot_init` has been applied to so far (in this process)."""
    return tuple(_DATACLASS_INIT)


def dataclass_init(cls: type) -> Callable[..., None]:
    """The ``__init__`` dataclasses generated for ``cls``, which :func:`slot_init` replaced."""
    return _DATACLASS_INIT[cls]
