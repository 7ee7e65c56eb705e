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
its place (same values for every ``i`` in ``0 .. T-1``). Names are looked up as MLIR scopes
them: sibling regions (the bodies of two stacked RNNs' loops) reuse the same value names.
A ``tfl.slice`` at a loop counter that is not such an update is refused here, saying what
did not match; any other ``tfl.slice`` is left for the reader to refuse.
"""

from __future__ import annotations

import re

from npu_sim.errors import UnsupportedFeatureError

#: An operation's line may end in its source location (the converter's debug information).
_LOC = r"(?:\s+loc\(.*\))?$"
_SLICE = re.compile(r'^\s*(%[\w]+) = "tfl\.slice"\((%[\w#]+), (%[\w#]+), (%[\w#]+)\) : '
                    r'\(tensor<([^>]+)>, tensor<\d+xi32>, tensor<\d+xi32>\) -> tensor<[^>]+>' + _LOC)
_CONCAT3 = re.compile(r'^(\s*)(%[\w]+) = tosa\.concat (%[\w#]+), (%[\w#]+), (%[\w#]+) \{axis = 0 : i32\} : '
                      r'\(tensor<[^>]+>, tensor<([^>]+)>, tensor<[^>]+>\) -> tensor<([^>]+)>' + _LOC)
#: ``[counter, rest...]``: a slice's begin or size at the loop counter
_CONCAT2 = re.compile(r'^\s*(%[\w]+) = tosa\.concat (%[\w#]+), (%[\w#]+) \{axis = 0 : i32\} : '
                      r'\(tensor<1xi32>, tensor<\d+xi32>\) -> tensor<\d+xi32>' + _LOC)
_CONST = re.compile(r'^\s*(%[\w]+) = "tosa\.const"\(\) <\{values = dense<(-?\d+)> : tensor<(?:\d+x)?i32>\}> : ')
_RESHAPE = re.compile(r'^\s*(%[\w]+) = tosa\.reshape (%[\w#]+), %[\w#]+ : \(tensor<i32>, ')
_ADD = re.compile(r'^\s*(%[\w]+) = tosa\.add (%[\w#]+), (%[\w#]+) : \(tensor<i32>, tensor<i32>\)')
#: what an operation's line defines (``%5`` or ``%5:4``)
_DEFINES = re.compile(r"^\s*(%[\w]+)(?::\d+)? = ")


def rewrite(text: str, source: str = "") -> str:
    """``text`` with each row update of a sequence buffer written as an EQUAL and a SELECT;
    refuses (naming ``source``) a ``tfl.slice`` at a loop counter that is not part of one."""
    if '"tfl.slice"' not in text:
        return text
    lines = text.split("\n")
    scopes = _Scopes(lines)
    drop: set[int] = set()
    why: dict[int, str] = {}
    for k, line in enumerate(lines):
        m = _CONCAT3.match(line)
        if m is None:
            continue
        found = _row_update(scopes, k, m)
        if isinstance(found, str):
            why.update({j: found for j in _slices_read(scopes, k, m) if j not in why})
        elif found is not None:
            lines[k], replaced = found
            drop |= replaced
    _refuse_counter_slices(scopes, drop, why, source)
    return "\n".join(line for k, line in enumerate(lines) if k not in drop)


class _Scopes:
    """Which region each line is in and the values each region defines: MLIR reuses value
    names in sibling regions (two loops' bodies both define ``%59``), so a name means the
    definition in the innermost region around its reader that has one."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.region: list[int] = []
        self.parent = [-1]
        self.defined: dict[tuple[int, str], int] = {}
        open_regions = [0]
        for k, line in enumerate(lines):
            stripped = line.strip()
            if stripped.startswith("}") and len(open_regions) > 1:
                open_regions.pop()
            self.region.append(open_regions[-1])
            if (m := _DEFINES.match(line)) is not None:
                self.defined[(open_regions[-1], m.group(1))] = k
            if stripped.endswith("{"):
                self.parent.append(open_regions[-1])
                open_regions.append(len(self.parent) - 1)

    def definition(self, name: str, region: int) -> int | None:
        """The line defining ``name`` as read in ``region``, or None (a block argument)."""
        while region >= 0:
            if (found := self.defined.get((region, name))) is not None:
                return found
            region = self.parent[region]
        return None

    def local(self, name: str, region: int) -> int | None:
        """The line defining ``name`` in ``region`` itself, or None."""
        return self.defined.get((region, name))

    def match(self, pattern: re.Pattern[str], name: str, region: int, local: bool = False) -> re.Match[str] | None:
        """``pattern`` matched on the definition of ``name`` read in ``region`` (``local``: only
        a definition in ``region`` itself)."""
        k = self.local(name, region) if local else self.definition(name, region)
        return pattern.match(self.lines[k]) if k is not None else None

    def constant(self, name: str, region: int) -> int | None:
        """The value of the splat i32 constant ``name``, or None."""
        m = self.match(_CONST, name, region)
        return int(m.group(2)) if m is not None else None

    def readers(self, name: str, k: int) -> int:
        """Operations reading ``name`` as line ``k`` defines it."""
        pattern = re.compile(re.escape(name) + r"(?![\w#])")
        return sum(1 for j, line in enumerate(self.lines)
                   if j != k and pattern.search(line) and self.definition(name, self.region[j]) == k)


def _row_update(s: _Scopes, k: int, m: re.Match[str]) -> tuple[str, set[int]] | str | None:
    """The SELECT lines for the concat ``m`` on line ``k`` and the slice lines they replace; why
    not (if it reads a ``tfl.slice``); or None (no slice: not a row update)."""
    indent, result, head, row, tail, row_type, out_type = m.groups()
    region = s.region[k]
    head_line, tail_line = s.local(head, region), s.local(tail, region)
    h = _SLICE.match(s.lines[head_line]) if head_line is not None else None
    t = _SLICE.match(s.lines[tail_line]) if tail_line is not None else None
    if h is None or t is None or head_line is None or tail_line is None:
        return None if h is None and t is None else "only one side of the new row is a tfl.slice"
    buf, buf_type = h.group(2), h.group(5)
    dims, element = _dims(buf_type)
    if dims is None or t.group(2) != buf or out_type != buf_type or _dims(row_type) != ([1, *dims[1:]], element):
        return f"the slices and the new row do not make up the buffer {buf} ({buf_type}) along axis 0"
    index = _counter_bounds(s, region, h, t)
    if index is None:
        return "its slices are not rows 0 .. i-1 and i+1 .. of the buffer at one loop counter i"
    readers = s.readers(head, head_line), s.readers(tail, tail_line)
    if readers != (1, 1):
        return f"its slices have other readers ({readers[0] - 1} and {readers[1] - 1})"
    select = _select(indent, result, index, row, row_type, buf, dims, element)
    return "\n".join(select), {head_line, tail_line}


def _counter_bounds(s: _Scopes, region: int, head: re.Match[str], tail: re.Match[str]) -> str | None:
    """The counter ``i`` (its 1-element value) if ``head`` is ``buf[0 : i]`` and ``tail`` is
    ``buf[i + 1 :]``, or None."""
    head_size = s.match(_CONCAT2, head.group(4), region, local=True)
    tail_begin = s.match(_CONCAT2, tail.group(3), region, local=True)
    if head_size is None or tail_begin is None or s.constant(head.group(3), region) != 0:
        return None
    if s.constant(head_size.group(3), region) != -1 or s.constant(tail_begin.group(3), region) != 0 or \
            s.constant(tail.group(4), region) != -1:
        return None
    i = s.match(_RESHAPE, head_size.group(2), region, local=True)
    j = s.match(_RESHAPE, tail_begin.group(2), region, local=True)
    following = s.match(_ADD, j.group(2), region, local=True) if j is not None else None
    if i is None or following is None:
        return None
    step = [b for a, b in (following.group(2, 3), following.group(3, 2)) if a == i.group(2)]
    return head_size.group(2) if step and s.constant(step[0], region) == 1 else None


def _slices_read(s: _Scopes, k: int, m: re.Match[str]) -> list[int]:
    """The lines of the ``tfl.slice`` operations the concat ``m`` on line ``k`` reads."""
    found = [s.definition(name, s.region[k]) for name in m.group(3, 5)]
    return [j for j in found if j is not None and _SLICE.match(s.lines[j])]


def _refuse_counter_slices(s: _Scopes, rewritten: set[int], why: dict[int, str], source: str) -> None:
    """Refuse the first ``tfl.slice`` left whose begin or size is at a loop counter: npu-sim
    means to rewrite those (the converter cannot), so the refusal says what did not match."""
    for k, line in enumerate(s.lines):
        m = _SLICE.match(line)
        if m is None or k in rewritten or \
                all(s.match(_CONCAT2, name, s.region[k]) is None for name in m.group(3, 4)):
            continue
        reason = why.get(k, "no concatenation puts a new row between it and a second slice")
        where = f"{source}: " if source else ""
        raise UnsupportedFeatureError(
            f"{where}operator SLICE (tfl.slice) {m.group(1)} at a loop counter: npu-sim rewrites a loop's row update "
            f"of its sequence buffer (two tfl.slice around the new row, concatenated) and cannot match this one: "
            f"{reason}")


def _dims(tensor_type: str) -> tuple[list[int], str] | tuple[None, str]:
    *dims, element = tensor_type.split("x")
    if not dims or not all(d.isdigit() for d in dims):
        return None, element
    return [int(d) for d in dims], element


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
