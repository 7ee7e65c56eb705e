"""The schema description drives the codec: check it against flatc's own output for tosa.fbs."""

from __future__ import annotations

import re

import pytest

from npu_sim.tosa import fb_schema
from tests.tosa import tosa_tools_io as tt

#: flatc-generated Python bindings shipped with tosa-tools (an independent reading of tosa.fbs)
BINDINGS = tt._SITE / "tosa"
_SLOT = re.compile(r"def (\w+?)Add(\w+)\(builder, \w+\):\n\s+builder\.Prepend(\w+?)Slot\((\d+), "
                   r"(?:flatbuffers\.number_types\.UOffsetTFlags\.py_type\(\w+\)|\w+), ([-\w]+)\)")
_KIND = {"Uint32": "uint32", "Uint8": "ubyte", "Bool": "bool", "Int32": "int32",
         "Uint64": "ulong"}


def _normal(name: str) -> str:
    return name.replace("_", "").lower()


@pytest.mark.parametrize("table", sorted(fb_schema.TABLES))
def test_field_slots_types_and_defaults_match_flatc_bindings(table):
    source = (BINDINGS / f"{table}.py").read_text()
    theirs = {}
    for owner, field, kind, slot, default in _SLOT.findall(source):
        if owner == table:
            theirs[_normal(field)] = (int(slot), kind, default)
    ours = fb_schema.fields(table)
    assert len(ours) == len(theirs)
    for field in ours:
        slot, kind, default = theirs[_normal(field.name)]
        assert field.slot == slot, field
        assert field.vtable_offset == 4 + 2 * slot
        if kind == "UOffsetTRelative":
            assert field.kind in ("string", "table", "union", "vector"), field
        else:
            assert fb_schema.scalar_type(field) in (_KIND[kind], "uint64" if kind == "Uint64" else ""), field
            assert int(field.default) == int(default), field


def test_enum_base_and_nonzero_defaults_match_tosa_fbs():
    text = tt.TOSA_FBS.read_text()
    bases = set(re.findall(r"^enum \w+\s*:\s*(\w+)", text, flags=re.M))
    assert bases == {fb_schema.ENUM_BASE}
    defaults = {}
    for table, body in re.findall(r"^table (\w+)\s*\{(.*?)^\}", text, flags=re.M | re.S):
        for field, value in re.findall(r"^\s*(\w+)\s*:\s*\w+\s*=\s*([-\w]+)\s*;", body, flags=re.M):
            if value not in ("0", "false"):
                defaults[(table, field)] = True if value == "true" else int(value)
    assert defaults == fb_schema.NONZERO_DEFAULTS


def test_union_occupies_two_slots():
    slots = {f.name: (f.slot, f.kind) for f in fb_schema.fields("TosaOperator")}
    assert slots == {"op": (0, "enum"), "attribute_type": (1, "union_type"),
                     "attribute": (2, "union"), "inputs": (3, "vector"), "outputs": (4, "vector"),
                     "location": (5, "table")}
    assert fb_schema.union_member("Attribute", 1) == "ArgMaxAttribute"
    assert fb_schema.union_member("Attribute", 0) is None
    assert fb_schema.union_member("Attribute", 101) is None
    assert fb_schema.union_tag("Attribute", "MatMulTAttribute") == 100
