"""The graph loader on random and mutated bytes: a graph that passes validation, or an
:class:`NpuSimError` (exit 2 in the CLI); never another exception, never a hang."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_sim.errors import NpuSimError
from npu_sim.tosa.loader import parse_graph

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.tosa"))
SMALL_EXAMPLES = [p for p in EXAMPLES if p.stat().st_size < 64 * 1024]
FUZZ = settings(max_examples=150, deadline=2000, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _parse_or_refuse(data: bytes, name: str = "fuzz.tosa") -> None:
    try:
        parse_graph(data, name)
    except NpuSimError as exc:
        assert str(exc).strip() and "\n" not in str(exc).strip()


@FUZZ
@given(st.binary(max_size=2048))
def test_random_bytes(data):
    _parse_or_refuse(data)


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes_behind_a_tosa_identifier(data):
    _parse_or_refuse(data[:4] + b"TOSA" + data[4:])


@pytest.mark.parametrize("example", SMALL_EXAMPLES, ids=lambda p: p.stem)
def test_mutated_real_graphs(example):
    original = example.read_bytes()

    @FUZZ
    @given(st.lists(st.tuples(st.integers(0, len(original) - 1), st.integers(0, 255)), min_size=1, max_size=8),
           st.integers(8, len(original)))
    def mutate(changes, keep):
        data = bytearray(original[:keep])
        for position, value in changes:
            if position < len(data):
                data[position] = value
        _parse_or_refuse(bytes(data), example.name)

    mutate()


@FUZZ
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20))
def test_random_json_documents(document):
    _parse_or_refuse(json.dumps(document).encode(), "fuzz.json")


# --- TOSA MLIR text: the converter's output, damaged ------------------------------------------
ROOT = Path(__file__).resolve().parents[2]
MLIR_EXAMPLES = [p for p in sorted((ROOT / "examples").glob("*.mlir")) if p.stat().st_size < 64 * 1024] + [
    ROOT / "tests" / "data" / "converted" / "dense_int8_converter.mlir"]   # (the converter's text: #loc, hex)
#: characters whose loss or repetition unbalances the reader's bracketed spans and strings
BRACKETS = re.compile(r'[\[\](){}<>"#]')
MLIR_FUZZ = settings(max_examples=60, deadline=5000, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _parse_mlir_or_refuse(text: str | bytes) -> None:
    data = text.encode("utf-8", errors="surrogatepass") if isinstance(text, str) else text
    _parse_or_refuse(data, "fuzz.mlir")


@pytest.mark.parametrize("example", MLIR_EXAMPLES, ids=lambda p: p.stem)
def test_mutated_mlir_is_read_or_refused_in_one_line(example):
    """Truncated files, flipped bytes, lines spliced in or dropped, absurd dimensions and
    damaged hex constants, a bracket or quote dropped or doubled: a graph, or one line naming what
    is wrong (never another error)."""
    text = example.read_text()
    lines = text.split("\n")
    brackets = [m.start() for m in BRACKETS.finditer(text)]

    @MLIR_FUZZ
    @given(st.sampled_from(["truncate", "bytes", "splice", "drop", "dims", "hex", "bracket"]),
           st.integers(0, len(text) - 1), st.integers(0, len(lines) - 1), st.integers(0, len(lines) - 1),
           st.sampled_from([0, 1, 99999999, 1 << 40, 3]), st.integers(0, 255))
    def mutate(kind, position, line_a, line_b, dim, byte):
        if kind == "truncate":
            _parse_mlir_or_refuse(text[:position])
        elif kind == "bytes":
            data = bytearray(text.encode())
            data[position % len(data)] = byte
            _parse_mlir_or_refuse(bytes(data))
        elif kind in ("splice", "drop"):
            changed = list(lines)
            if kind == "splice":
                changed[line_a] = lines[line_b]
            else:
                del changed[line_a]
            _parse_mlir_or_refuse("\n".join(changed))
        elif kind == "bracket":
            at = brackets[position % len(brackets)]
            _parse_mlir_or_refuse(text[:at] + text[at] * (byte % 3) + text[at + 1:])   # dropped, kept or doubled
        elif kind == "dims":
            _parse_mlir_or_refuse(re.sub(r"tensor<(\d+)x", f"tensor<{dim}x", text, count=1 + position % 4))
        else:
            start = text.find('"0x', position) if '"0x' in text else -1
            damaged = text if start < 0 else text[:start + 3 + byte % 16] + "zz" + text[start + 5 + byte % 16:]
            _parse_mlir_or_refuse(damaged)

    mutate()


def test_a_line_break_inside_an_operator_name_is_refused_in_one_line():
    """A damaged quote can pull the next line into an operator's name; the error still fits one line."""
    text = (ROOT / "tests" / "data" / "converted" / "dense_int8_converter.mlir").read_text()
    with pytest.raises(NpuSimError) as error:
        parse_graph(text.replace('"tosa.const"', '"tosa.co\nst"', 1).encode(), "x.mlir")
    assert str(error.value) == "x.mlir: %1: unknown TOSA operator tosa.co st"
