"""Kafka's message schemas read generically: wire bytes in, Kafka's JSON rendering out.

Kafka describes every versioned record it stores (consumer-offset and group records, transaction
log records, KRaft metadata records, KRaft control records) in JSON schema files that its build
turns into Java classes (``generator/.../MessageDataGenerator.java``) and JSON converters
(``JsonConverterGenerator.java``). Those schema files are data, kept verbatim in ``schemas/``
(provenance in ``schemas/PROVENANCE.md``). This module interprets them at run time instead of
generating code:

* :func:`load_schema` parses one file (line comments allowed, as Kafka's loader allows them);
* :func:`read_message` decodes a message of a given version as the generated ``read`` does:
  fields present in that version in schema order, flexible versions with compact
  (length + 1 varint) strings/bytes/arrays and a trailing tagged-field section, tagged fields
  filled with their defaults unless present, unknown tags skipped, and the generated code's
  errors (``Can't read version 5 of OffsetCommitValue``, ``non-nullable field topic was
  serialized as null``, ...);
* :func:`to_json_tree` and :func:`dumps` render it as the generated ``JsonConverter.write``
  followed by Jackson's ``ObjectNode.toString`` would: camelCase names, fields of that version
  only, tagged fields only when not at their default, uuids in URL-safe base64 without padding,
  bytes in standard base64, float64 as Java's ``Double.toString``, Jackson's string escapes.
"""
from __future__ import annotations

import base64
import functools
import json
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

__all__ = [
    "SCHEMA_DIR",
    "Field",
    "JsonBinary",
    "JsonDouble",
    "MessageSchema",
    "ReadError",
    "Readable",
    "Struct",
    "Versions",
    "default_value",
    "dumps",
    "generated_check",
    "java_double_str",
    "load_schema",
    "read_message",
    "schema_names",
    "to_json_tree",
    "uuid_str",
]

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas")
SHORT_MAX = 0x7FFF


class ReadError(Exception):
    """A decoding failure, carrying the message Kafka's reader gives for it.

    ``java_message`` is ``None`` where Kafka's exception has no message (a
    ``BufferUnderflowException`` when the bytes run out); Kafka prints that as ``null``.
    """

    def __init__(self, java_message: str | None) -> None:
        super().__init__(java_message if java_message is not None else "not enough bytes")
        self.java_message = java_message

    @property
    def kafka_text(self) -> str:
        return "null" if self.java_message is None else self.java_message


# --- schema model --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Versions:
    """An inclusive version range; empty when ``lo > hi`` (Kafka's ``Versions``)."""

    lo: int
    hi: int

    @staticmethod
    def parse(text: str | None, default: Versions | None) -> Versions | None:
        """``"none"``, ``"3"``, ``"1-4"`` or ``"2+"`` (``Versions.parse``)."""
        if text is None or not str(text).strip():
            return default
        s = str(text).strip()
        if s == "none":
            return NONE
        if s.endswith("+"):
            return Versions(int(s[:-1]), SHORT_MAX)
        if "-" in s:
            lo, hi = s.split("-", 1)
            return Versions(int(lo), int(hi))
        return Versions(int(s), int(s))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def intersect(self, other: Versions) -> Versions:
        lo, hi = max(self.lo, other.lo), min(self.hi, other.hi)
        return Versions(lo, hi) if lo <= hi else NONE

    def subtract(self, other: Versions) -> Versions:
        """``Versions.subtract`` (the schemas never need the two-range case)."""
        if other.lo <= self.lo:
            if other.hi >= self.hi:
                return NONE
            if other.hi < self.lo:
                return self
            return Versions(other.hi + 1, self.hi)
        if other.hi >= self.hi:
            return self if other.lo - 1 < 0 or other.lo - 1 >= self.hi else Versions(
                self.lo, other.lo - 1)
        raise ValueError(f"{self} minus {other} is two ranges")


def generated_check(containing: Versions, possible: Versions, version: int) -> bool:
    """The version test Kafka's generated code makes for ``version in containing``.

    The generator (``VersionConditional.generate``) simplifies each test on the assumption that
    ``version`` is in ``possible`` (the versions the enclosing code can see): a bound that cannot
    fail for those versions is left out. For a version outside ``possible`` -- a record newer than
    its schema -- the generated code therefore decides by the bounds it kept; this mirrors it, so
    unknown versions decode (or fail) exactly as in Kafka.
    """
    c, p = containing, possible
    if p.lo < c.lo:
        if p.hi > c.hi:
            return c.lo <= version <= c.hi
        if p.hi >= c.lo:
            return version >= c.lo
        return False
    if p.hi >= c.lo and p.lo <= c.hi:
        return version <= c.hi if p.hi > c.hi else True
    return False


NONE = Versions(0, -1)
_PRIMITIVES = frozenset(
    ["bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "uuid"])
_VARIABLE = frozenset(["string", "bytes", "records"])


@dataclass(frozen=True, eq=False)
class Struct:
    """A structure: the message itself, an inline struct of a field, or a common struct.

    ``parent`` is the version range its generated class is built for (``parentVersions``: the
    message's valid versions for the message, the enclosing struct's range for an inline
    struct, its own versions for a common struct)."""

    name: str
    versions: Versions
    parent: Versions
    fields: tuple[Field, ...]

    @property
    def current(self) -> Versions:
        """``curVersions``: the versions the generated reader assumes."""
        return self.parent.intersect(self.versions)

    @functools.cached_property
    def tagged(self) -> dict[int, Field]:
        return {f.tag: f for f in self.fields
                if f.tag is not None and not f.versions.intersect(f.tagged).empty}


@dataclass(frozen=True, eq=False)
class Field:
    """One field of a struct. ``kind`` is a primitive name, ``string``/``bytes``/``records``,
    ``array`` (``element`` then names the element kind) or ``struct``."""

    name: str
    kind: str
    element: str | None
    struct: Struct | None
    versions: Versions
    tagged: Versions
    nullable: Versions
    flexible: Versions | None
    tag: int | None
    default: str
    zero_copy: bool

    @property
    def json_name(self) -> str:
        """``FieldSpec.camelCaseName``: the name with its first letter lower-cased."""
        return self.name[:1].lower() + self.name[1:]


@dataclass(frozen=True, eq=False)
class MessageSchema:
    """One schema file: a ``data`` message, or a ``metadata`` record with its ``api_key``."""

    name: str
    type: str
    api_key: int | None
    valid_versions: Versions
    flexible_versions: Versions
    root: Struct


def _strip_comments(text: str) -> str:
    """Kafka's schema files carry ``//`` line comments (its loader allows them); drop them,
    leaving ``//`` inside strings alone."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _default_text(raw: Any) -> str:
    # The generator reads "default" as a string; a JSON number or bool is coerced, null is "".
    if raw is None:
        return ""
    if isinstance(raw, bool):
        return "true" if raw else "false"
    return str(raw)


def _parse_struct(name: str, versions: Versions, parent: Versions, fields: list[dict],
                  common: dict[str, dict], built: dict[str, Struct]) -> Struct:
    inner = parent.intersect(versions)
    return Struct(name, versions, parent,
                  tuple(_parse_field(f, inner, common, built) for f in fields))


def _parse_field(spec: dict, parent: Versions, common: dict[str, dict],
                 built: dict[str, Struct]) -> Field:
    tagged = Versions.parse(spec.get("taggedVersions"), NONE)
    assert tagged is not None
    versions = Versions.parse(spec.get("versions"), None if tagged.empty else tagged)
    if versions is None:
        raise ValueError(f"field {spec.get('name')} has no versions")
    type_name = spec["type"].strip()
    element = None
    struct_ = None
    base = type_name[2:] if type_name.startswith("[]") else type_name
    if base in _PRIMITIVES or base in _VARIABLE:
        kind_of_base = base
    else:
        kind_of_base = "struct"
        if "fields" in spec:
            struct_ = _parse_struct(base, versions, parent, spec["fields"], common, built)
        elif base in built:
            struct_ = built[base]
        elif base in common:
            c = common[base]
            own = Versions.parse(c.get("versions"), None) or versions
            struct_ = _parse_struct(base, own, own, c.get("fields", []), common, built)
            built[base] = struct_
        else:
            raise ValueError(f"unknown type {type_name} of field {spec.get('name')}")
    if type_name.startswith("[]"):
        kind, element = "array", kind_of_base
    else:
        kind = kind_of_base
    flexible = Versions.parse(spec.get("flexibleVersions"), None)
    tag = spec.get("tag")
    return Field(
        name=spec["name"], kind=kind, element=element, struct=struct_, versions=versions,
        tagged=tagged, nullable=Versions.parse(spec.get("nullableVersions"), NONE) or NONE,
        flexible=flexible, tag=None if tag is None else int(tag),
        default=_default_text(spec.get("default")), zero_copy=bool(spec.get("zeroCopy")),
    )


@functools.cache
def load_schema(name: str) -> MessageSchema:
    """The schema ``schemas/<name>.json`` (e.g. ``"OffsetCommitValue"``)."""
    path = os.path.join(SCHEMA_DIR, f"{name}.json")
    with open(path, encoding="utf-8") as fh:
        spec = json.loads(_strip_comments(fh.read()))
    valid = Versions.parse(spec.get("validVersions"), None)
    if valid is None:
        raise ValueError(f"{path}: no validVersions")
    flexible = Versions.parse(spec.get("flexibleVersions"), NONE) or NONE
    common = {c["name"]: c for c in spec.get("commonStructs", [])}
    root = _parse_struct(spec["name"], valid, valid, spec.get("fields", []), common, {})
    api_key = spec.get("apiKey")
    return MessageSchema(spec["name"], spec.get("type", "data"),
                         None if api_key is None else int(api_key), valid, flexible, root)


def schema_names() -> list[str]:
    """Names of every schema file shipped in ``schemas/``."""
    return sorted(n[:-5] for n in os.listdir(SCHEMA_DIR) if n.endswith(".json"))


# --- wire reading --------------------------------------------------------------------------------
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


class Readable:
    """``ByteBufferAccessor`` over ``buf[pos:end]``: big-endian fixed-width reads, Kafka's
    unsigned varint, and its errors."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int) -> int:
        p = self.pos
        if self.end - p < n:
            raise ReadError(None)  # BufferUnderflowException: no message
        self.pos = p + n
        return p

    def byte(self) -> int:
        v = self.buf[self._take(1)]
        return v - 256 if v > 127 else v

    def short(self) -> int:
        return _I16.unpack_from(self.buf, self._take(2))[0]

    def ushort(self) -> int:
        return _U16.unpack_from(self.buf, self._take(2))[0]

    def int(self) -> int:
        return _I32.unpack_from(self.buf, self._take(4))[0]

    def uint(self) -> int:
        return _U32.unpack_from(self.buf, self._take(4))[0]

    def long(self) -> int:
        return _I64.unpack_from(self.buf, self._take(8))[0]

    def double(self) -> float:
        return _F64.unpack_from(self.buf, self._take(8))[0]

    def uuid(self) -> bytes:
        p = self._take(16)
        return bytes(self.buf[p:p + 16])

    def uvarint(self) -> int:
        """``ByteUtils.readUnsignedVarint``: at most 5 bytes, the result a Java int."""
        result = 0
        for i in range(5):
            b = self.buf[self._take(1)]
            if i == 4:
                result |= (b & 0xFF) << 28
                result &= 0xFFFFFFFF
                if b & 0x80:
                    shown = format(result, "x")
                    raise ReadError("Varint is too long, the most significant bit in the 5th "
                                    f"byte is set, converted value: {shown}")
                break
            result |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                break
        return result - (1 << 32) if result >= 1 << 31 else result

    def array(self, n: int) -> bytes:
        """``readArray``: ``n`` bytes or Kafka's error naming what is left."""
        if n > self.remaining:
            raise ReadError(f"Error reading byte array of {n} byte(s): only {self.remaining} "
                            "byte(s) available")
        p = self._take(n)
        return bytes(self.buf[p:p + n])

    def byte_buffer(self, n: int) -> bytes:
        """``readByteBuffer`` (zero-copy bytes): a slice whose limit may not pass the end."""
        if n > self.remaining:
            raise ReadError(f"newLimit > capacity: ({n} > {self.remaining})")
        p = self._take(n)
        return bytes(self.buf[p:p + n])


def _read_primitive(r: Readable, kind: str) -> Any:
    if kind == "int32":
        return r.int()
    if kind == "int64":
        return r.long()
    if kind == "int16":
        return r.short()
    if kind == "int8":
        return r.byte()
    if kind == "bool":
        return r.byte() != 0
    if kind == "uuid":
        return r.uuid()
    if kind == "uint16":
        return r.ushort()
    if kind == "uint32":
        return r.uint()
    if kind == "float64":
        return r.double()
    raise ReadError(f"Unsupported field type {kind}")


def _read_variable(r: Readable, f: Field, kind: str, name: str, version: int,
                   possible: Versions, message_flexible: Versions, nullable: Versions) -> Any:
    """``generateVariableLengthReader``: a string, bytes, records or array field (or an array
    element when ``name`` ends in `` element``)."""
    field_flexible = f.flexible if f.flexible is not None else message_flexible
    flexible = generated_check(field_flexible, possible, version)
    if kind == "array" and f.element in ("struct", "string", "bytes") and not name.endswith(
            " element"):
        # the generator lifts the flexible test out of such arrays: two readers, each seeing
        # only its half of the versions
        try:
            possible = (possible.intersect(field_flexible) if flexible
                        else possible.subtract(field_flexible))
        except ValueError:
            pass
    if flexible:
        length = r.uvarint() - 1
    elif kind == "string":
        length = r.short()
    else:
        length = r.int()
    if length < 0:
        if generated_check(nullable, possible, version):
            return None
        raise ReadError(f"non-nullable field {name} was serialized as null")
    if kind == "string":
        if length > SHORT_MAX:
            raise ReadError(f"string field {name} had invalid length {length}")
        return r.array(length).decode("utf-8", "replace")
    if kind in ("bytes", "records"):
        return r.byte_buffer(length) if f.zero_copy or kind == "records" else r.array(length)
    if length > r.remaining:
        raise ReadError(f"Tried to allocate a collection of size {length}, but there are only "
                        f"{r.remaining} bytes remaining.")
    element = f.element
    out: list[Any] = []
    for _ in range(length):
        if element == "struct":
            assert f.struct is not None
            out.append(_read_struct(r, f.struct, version, message_flexible))
        elif element in _VARIABLE:
            out.append(_read_variable(r, f, element, f"{name} element", version, possible,
                                      message_flexible, NONE))
        else:
            out.append(_read_primitive(r, element or ""))
    return out


def _read_field(r: Readable, f: Field, version: int, possible: Versions,
                message_flexible: Versions, tagged: bool) -> Any:
    if f.kind == "struct":
        assert f.struct is not None
        if generated_check(f.nullable, possible, version):
            if tagged:
                if r.uvarint() <= 0:
                    return None
            elif r.byte() < 0:
                return None
        return _read_struct(r, f.struct, version, message_flexible)
    if f.kind in _PRIMITIVES:
        return _read_primitive(r, f.kind)
    return _read_variable(r, f, f.kind, f.json_name, version, possible, message_flexible,
                          f.nullable)


def _read_struct(r: Readable, s: Struct, version: int, message_flexible: Versions) -> dict:
    """The generated ``read(Readable, short)`` of one struct."""
    if not generated_check(s.parent, s.versions, version):
        raise ReadError(f"Can't read version {version} of {s.name[:1].upper() + s.name[1:]}")
    cur = s.current
    out: dict[str, Any] = {}
    for f in s.fields:
        mandatory = f.versions.subtract(f.tagged)
        if generated_check(mandatory, cur, version):
            out[f.name] = _read_field(r, f, version, cur.intersect(mandatory), message_flexible,
                                      False)
        else:
            out[f.name] = default_value(f)
    if generated_check(message_flexible, cur, version):
        cur_flexible = cur.intersect(message_flexible)
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            size = r.uvarint()
            f = s.tagged.get(tag)
            if f is None:
                r.array(size)  # an unknown tagged field: kept raw by Kafka, never printed
                continue
            valid_tagged = f.versions.intersect(f.tagged)
            if not generated_check(valid_tagged, cur_flexible, version):
                raise ReadError(f"Tag {tag} is not valid for version {version}")
            out[f.name] = _read_field(r, f, version, cur_flexible.intersect(valid_tagged),
                                      message_flexible, True)
    return out


def read_message(schema: MessageSchema, buf: bytes | memoryview, version: int,
                 pos: int = 0, end: int | None = None) -> tuple[dict, int]:
    """Decode ``schema`` at ``version`` from ``buf[pos:end]``; (fields by schema name, position
    after the message). Raises :class:`ReadError` with Kafka's message."""
    r = Readable(buf, pos, end)
    return _read_struct(r, schema.root, version, schema.flexible_versions), r.pos


# --- defaults (FieldSpec.fieldDefault) -----------------------------------------------------------
def _int_default(text: str) -> int:
    if not text:
        return 0
    return int(text[2:], 16) if text.startswith("0x") else int(text)


def default_value(f: Field) -> Any:
    """The value the generated class holds for a field absent from the wire."""
    d = f.default
    k = f.kind
    if k == "bool":
        return d.lower() == "true"
    if k in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return _int_default(d)
    if k == "float64":
        return float(d) if d else 0.0
    if k == "uuid":
        return base64.urlsafe_b64decode(d + "=" * (-len(d) % 4)) if d else bytes(16)
    if d == "null" or k == "records":
        return None
    if k == "string":
        return d
    if k in ("bytes", "records"):
        return b""
    if k == "array":
        return []
    assert f.struct is not None
    return {g.name: default_value(g) for g in f.struct.fields}


def _is_default(f: Field, v: Any) -> bool:
    """``FieldSpec.generateNonDefaultValueCheck`` negated: a tagged field is written to JSON
    (and to the wire) only when this is False."""
    if f.kind in ("array", "bytes", "records"):
        if f.default == "null":
            return v is None
        return v is not None and len(v) == 0
    return v == default_value(f)


# --- JSON rendering (JsonConverterGenerator + Jackson) --------------------------------------------
class JsonBinary(bytes):
    """A ``BinaryNode``: rendered as a standard base64 string."""


class JsonDouble(float):
    """A ``DoubleNode``: rendered as Java's ``Double.toString``."""


def uuid_str(raw: bytes) -> str:
    """``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _value_tree(f: Field, kind: str, v: Any, version: int) -> Any:
    if v is None:
        return None
    if kind == "uuid":
        return uuid_str(v)
    if kind == "float64":
        return JsonDouble(v)
    if kind in ("bytes", "records"):
        return JsonBinary(b"" if kind == "records" else v)
    if kind == "struct":
        assert f.struct is not None
        return to_json_tree(f.struct, v, version)
    if kind == "array":
        assert f.element is not None
        return [_value_tree(f, f.element, e, version) for e in v]
    return v  # bool, integers, string


def to_json_tree(s: Struct | MessageSchema, values: dict, version: int) -> dict:
    """The ``JsonConverter.write`` tree of a decoded struct: an insertion-ordered dict whose
    leaves are ``str``/``int``/``bool``/``None``/:class:`JsonBinary`/:class:`JsonDouble`."""
    struct_ = s.root if isinstance(s, MessageSchema) else s
    cur = struct_.current
    node: dict[str, Any] = {}
    for f in struct_.fields:
        if not generated_check(f.versions, cur, version):
            continue
        v = values[f.name]
        if generated_check(f.tagged, cur.intersect(f.versions), version) and _is_default(f, v):
            continue
        node[f.json_name] = _value_tree(f, f.kind, v, version)
    return node


_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r",
                 ord('"'): '\\"', ord("\\"): "\\\\"})


def _json_string(s: str) -> str:
    # Jackson's default escaping: control characters, quote and backslash; nothing else.
    return '"' + s.translate(_ESCAPES) + '"'


def java_double_str(d: float) -> str:
    """Java's ``Double.toString``: shortest round-trip digits, plain notation for
    1e-3 <= |d| < 1e7 (with at least one fraction digit), else ``d.dddE±n``."""
    if d != d:
        return "NaN"
    if d in (float("inf"), float("-inf")):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if str(d).startswith("-") else "0.0"
    sign = "-" if d < 0 else ""
    _, digits_t, exp = Decimal(repr(abs(d))).as_tuple()
    assert isinstance(exp, int)
    digits = "".join(map(str, digits_t)).rstrip("0") or "0"
    exp += len("".join(map(str, digits_t))) - len(digits)
    if len(digits) == 1:
        # Java renders at least two digits: the two-digit decimal nearest the exact value
        # (4.9E-324 for Double.MIN_VALUE, where the shortest would be 5E-324)
        two = f"{abs(d):.1e}"
        mantissa, e2 = two.split("e")
        digits = mantissa.replace(".", "").rstrip("0") or "0"
        exp = int(e2) - (len(digits) - 1)
    point = len(digits) + exp  # decimal point position relative to the digit string
    if 1e-3 <= abs(d) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def _dump(node: Any, out: list[str]) -> None:
    if isinstance(node, dict):
        out.append("{")
        first = True
        for k, v in node.items():
            if not first:
                out.append(",")
            first = False
            out.append(_json_string(k))
            out.append(":")
            _dump(v, out)
        out.append("}")
    elif isinstance(node, list):
        out.append("[")
        for i, v in enumerate(node):
            if i:
                out.append(",")
            _dump(v, out)
        out.append("]")
    elif isinstance(node, str):
        out.append(_json_string(node))
    elif isinstance(node, JsonBinary):
        out.append('"' + base64.b64encode(node).decode("ascii") + '"')
    elif node is None:
        out.append("null")
    elif isinstance(node, bool):
        out.append("true" if node else "false")
    elif isinstance(node, float):  # JsonDouble, or any float
        text = java_double_str(float(node))
        # Jackson quotes the non-numeric values (WRITE_NAN_AS_STRINGS is on by default)
        out.append(f'"{text}"' if text in ("NaN", "Infinity", "-Infinity") else text)
    elif isinstance(node, int):
        out.append(str(node))
    else:
        raise TypeError(f"cannot render {type(node).__name__} as JSON")


def dumps(node: Any) -> str:
    """``JsonNode.toString`` of a tree from :func:`to_json_tree`: compact, keys in order."""
    out: list[str] = []
    _dump(node, out)
    return "".join(out)


def iter_fields(s: Struct) -> Iterator[Field]:
    """Every field of a struct and its nested structs, depth first."""
    for f in s.fields:
        yield f
        if f.struct is not None:
            yield from iter_fields(f.struct)
