"""Row updates of a loop's sequence buffer: ``concat(slice(buf, 0, i), row, slice(buf, i + 1))``.

A Keras RNN with ``return_sequences=True`` that TFLite writes as a WHILE loop stores each
step's output in a loop-carried buffer ``buf`` of T rows: the body keeps rows ``0 .. i-1``
and ``i+1 .. T-1`` with two SLICEs whose begin and size depend on the loop counter ``i`` and
concatenates the new row between them. TOSA's SLICE takes a constant start and size, so
the converter leaves both as ``tfl.slice``. Together they are a select of one row, which
TOSA does express::

    mask = EQUAL(rows, reshape(i))        rows = [0, 1, ..., T-1] along axis 0
    buf' = SELECT(mask, row, buf)          (row broadcast along axis 0)

:func:`rewrite` finds that pattern in the converter's MLIR text and writes the SELECT in
its place (same values for every ``i`` in ``0 .. T-1``). Anything else is left as it is
(and refused by the reader naming ``tfl.slice``).
"""

from __future__ import annotations

import re

#: An operation's line may end in its source location (the converter's debug information).
_LOC = r"(?:\s+loc\(.*\))?$"
_SLICE = re.compile(r'^\s*(%[\w]+) = "tfl\.slice"\((%[\w#]+), (%[\w#]+), (%[\w#]+)\) : '
                    r'\(tensor<([^>]+)>, tensor<\d+xi32>, tensor<\d+xi32>\) -> tensor<[^>]+>' + _LOC)
_CONCAT3 = re.compile(r'^(\s*)(%[\w]+) = tosa\.concat (%[\w#]+), (%[\w#]+), (%[\w#]+) \{axis = 0 : i32\} : '
                      r'\(tensor<[^>]+>, tensor<([^>]+)>, tensor<[^>]+>\) -> tensor<([^>]+)>' + _LOC)
_CONCAT2 = re.compile(r'^\s*(%[\w]+) = tosa\.concat (%[\w#]+), (%[\w#]+) \{axis = 0 : i32\} : '
                      r'\(tensor<1xi32>, tensor<\d+xi32>\) -> tensor<\d+xi32>' + _LOC)
_ZEROS = re.compile(r'^\s*(%[\w]+) = "tosa\.const"\(\) <\{values = dense<0> : tensor<\d+xi32>\}> : ')


def rewrite(text: str) -> str:
    """``text`` with each row update of a sequence buffer written as an EQUAL and a SELECT."""
    if '"tfl.slice"' not in text:
        return text
    lines = text.split("\n")
    facts = _Facts(lines)
    drop: set[int] = set()
    for k, line in enumerate(lines):
        m = _CONCAT3.match(line)
        found = _row_update(facts, m) if m is not None else None
        if found is None:
            continue
        lines[k], replaced = found
        drop |= replaced
    return "\n".join(line for k, line in enumerate(lines) if k not in drop)


class _Facts:
    """The slices, counter concats and zero constants of the text."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.slices = {m.group(1): (k, m) for k, line in enumerate(lines) if (m := _SLICE.match(line))}
        self.index_of = {m.group(1): m.group(2) for line in lines if (m := _CONCAT2.match(line))}
        self.zeros = {m.group(1) for line in lines if (m := _ZEROS.match(line))}


def _row_update(f: _Facts, m: re.Match[str]) -> tuple[str, set[int]] | None:
    """The SELECT lines for the concat ``m`` and the slice lines they replace, or None."""
    indent, result, head, row, tail, row_type, out_type = m.groups()
    if head not in f.slices or tail not in f.slices:
        return None
    (head_line, h), (tail_line, t) = f.slices[head], f.slices[tail]
    buf, buf_type = h.group(2), h.group(5)
    dims, element = _dims(buf_type)
    if dims is None:
        return None
    if t.group(2) != buf or out_type != buf_type or h.group(3) not in f.zeros or h.group(4) not in f.index_of:
        return None
    if _dims(row_type) != ([1, *dims[1:]], element) or _uses(f.lines, head) != 1 or _uses(f.lines, tail) != 1:
        return None
    select = _select(indent, result, f.index_of[h.group(4)], row, row_type, buf, dims, element)
    return "\n".join(select), {head_line, tail_line}


def _dims(tensor_type: str) -> tuple[list[int], str] | tuple[None, str]:
    *dims, element = tensor_type.split("x")
    if not dims or not all(d.isdigit() for d in dims):
        return None, element
    return [int(d) for d in dims], element


def _uses(lines: list[str], name: str) -> int:
    """Operations reading ``name`` (its definition aside)."""
    pattern = re.compile(re.escape(name) + r"(?![\w#])")
    return sum(1 for line in lines if pattern.search(line) and not line.lstrip().startswith(name + " ="))


def _select(indent: str, result: str, index: str, row: str, row_type: str, buf: str, dims: list[int],
            element: str) -> list[str]:
    base = "%row_update_" + result.lstrip("%")
    rank, count = len(dims), dims[0]
    ones = "x".join(["1"] * rank)
    column = "x".join([str(count)] + ["1"] * (rank - 1))
    buf_type = "x".join(str(d) for d in dims) + "x" + element
    values = ", ".join(str(r) for r in range(count))
    column_dims = ", ".join(str(d) for d in [count] + [1] * (rank - 1))
    shape = f"!tosa.shape<{rank}>"
    return [
        f"{indent}{base}_shape = tosa.const_shape {{values = dense<1> : tensor<{rank}xindex>}} : () -> {shape}",
        f"{indent}{base}_index = tosa.reshape {index}, {base}_shape : (tensor<1xi32>, !tosa.shape<{rank}>) "
        f"-> tensor<{ones}xi32>",
        f'{indent}{base}_rows_flat = "tosa.const"() <{{values = dense<[{values}]> : tensor<{count}xi32>}}> : () '
        f"-> tensor<{count}xi32>",
        f"{indent}{base}_column = tosa.const_shape {{values = dense<[{column_dims}]> : tensor<{rank}xindex>}} "
        f": () -> {shape}",
        f"{indent}{base}_rows = tosa.reshape {base}_rows_flat, {base}_column : (tensor<{count}xi32>, "
        f"!tosa.shape<{rank}>) -> tensor<{column}xi32>",
        f"{indent}{base}_mask = tosa.equal {base}_rows, {base}_index : (tensor<{column}xi32>, tensor<{ones}xi32>) "
        f"-> tensor<{column}xi1>",
        f"{indent}{result} = tosa.select {base}_mask, {row}, {buf} : (tensor<{column}xi1>, tensor<{row_type}>, "
        f"tensor<{buf_type}>) -> tensor<{buf_type}>",
    ]
