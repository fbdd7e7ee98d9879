"""Seeded random records of any struct and version, aimed at the corners of Kafka's JSON form.

Strings mix what Jackson escapes (quotes, backslashes, control characters printed as ``\\u00XX``), a literal
backslash-u, non-ASCII and astral characters; floats include those whose Java ``Double.toString`` form differs
from Python's ``repr`` (``1.0E7``, ``1.0E-4``, ``-0.0``, ``Infinity``, ``NaN``, subnormals); nullable fields
are often null, arrays often empty (and sometimes long), tagged fields often at their default (then left out of the JSON).
"""

from __future__ import annotations

import random

from kraftlake.protocol import runtime
from kraftlake.protocol.messages import class_for
from kraftlake.protocol.spec import INT_RANGES, FieldSpec, StructSpec

CHARS = [
    '"',
    "\\",
    "\n",
    "\r",
    "\t",
    "\b",
    "\f",
    "\x00",
    "\x01",
    "\x1f",
    "\x7f",
    "/",
    "<",
    "u",
    "\\u00e9",
    "é",
    "ü",
    "\u2028",
    "\ufeff",
    "中",
    "😀",
    "a",
    "b",
    "-",
    "_",
    ".",
    ":",
    " ",
    "0",
]

FLOATS = [
    0.0,
    -0.0,
    1.0,
    -1.5,
    1e7,
    9999999.0,
    9999999.999,
    1e-3,
    0.001,
    9.99e-4,
    1e-4,
    123456.789,
    1e21,
    1e22,
    1e23,
    0.1,
    0.2,
    0.30000000000000004,
    2.0**53,
    2.0**63,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    float("inf"),
    float("-inf"),
    float("nan"),
    100.0,
    1234567.5,
]


def random_float(rnd: random.Random) -> float:
    if rnd.random() < 0.5:
        return rnd.choice(FLOATS)
    return rnd.uniform(-1, 1) * 10.0 ** rnd.randint(-12, 12)


def random_string(rnd: random.Random) -> str:
    return "".join(rnd.choice(CHARS) for _ in range(rnd.choice([0, 1, 3, 8])))


def _scalar(f: FieldSpec, version: int, rnd: random.Random) -> object:
    base = f.base_type
    if f.struct is not None:
        return random_record(f.struct, version, rnd)
    if base in INT_RANGES:
        lo, hi = INT_RANGES[base]
        return rnd.choice([v for v in (lo, hi, 0, -1, 1, rnd.randint(lo, hi)) if lo <= v <= hi])
    if base == "bool":
        return rnd.random() < 0.5
    if base == "float64":
        return random_float(rnd)
    if base == "string":
        return random_string(rnd)
    if base in ("bytes", "records"):
        return rnd.randbytes(rnd.choice([0, 1, 2, 3, 5, 17]))
    if base == "uuid":
        return runtime.uuid_str(bytes(16) if rnd.random() < 0.2 else rnd.randbytes(16))
    raise AssertionError(f"no random value for {f.kafka_type}")


def random_value(f: FieldSpec, version: int, rnd: random.Random) -> object:
    if version not in f.versions:
        return f.default if f.struct is None or f.is_array else class_for(f.struct.qualname)()
    if f.nullable_in(version) and rnd.random() < 0.25:
        return None
    if f.tagged_in(version) and rnd.random() < 0.4:
        return f.default if f.struct is None or f.is_array else class_for(f.struct.qualname)()
    if f.is_array:
        return tuple(
            _scalar(f, version, rnd)
            for _ in range(rnd.choice([0, 0, 1, 2, 4, 40 if rnd.random() < 0.2 else 3]))
        )
    return _scalar(f, version, rnd)


def random_record(s: StructSpec, version: int, rnd: random.Random) -> object:
    """A record of struct ``s`` with every field set as it can be at ``version`` (others at their default)."""
    return class_for(s.qualname)(**{f.attr: random_value(f, version, rnd) for f in s.fields})
