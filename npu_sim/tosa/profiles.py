"""Which TOSA profiles and extensions a graph needs, from the specification's tables.

The TOSA 1.0 specification (tosa.xml, kept as data in
:mod:`npu_sim.tosa.profiles_generated`) lists for every operator the element-type
combinations it supports and which profile (PRO-INT, PRO-FP) or extension
(EXT-INT16, EXT-INT4, EXT-BF16, EXT-FP8E4M3, EXT-FP8E5M2, EXT-FFT, EXT-VARIABLE,
EXT-CONTROLFLOW, ...) each needs. :func:`required_profiles` binds each operator's
type variables (``in_t``, ``weight_t``, ``out_t``, ``acc_t`` from ``acc_type``...)
to its tensors' element types, finds the supporting rows and collects the
smallest consistent set of requirements. On top of the tables: RESCALE's
rounding mode (EXT-DOUBLEROUND, EXT-INEXACTROUND) and compile-time-constant
operands that are not constants (EXT-DYNAMIC).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict, cast

from npu_sim.tosa import profiles_generated as spec
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import Block, Graph, Operator
from npu_sim.tosa.ops import TOSA_1_0_OPS, Op

#: a typesupport row: (mode, type variable -> DType name, alternative requirement lists)
SupportRow = tuple[str, dict[str, str], list[list[str]]]


class OperatorSpec(TypedDict):
    """One operator's entry in the specification's tables (see profiles_generated)."""

    #: (argument, element type or type variable, argument type)
    inputs: list[tuple[str, str, str]]
    outputs: list[tuple[str, str, str]]
    #: indexes of the compile-time-constant inputs
    ctc_inputs: list[int]
    #: type variables
    types: list[str]
    support: list[SupportRow]


PROFILES: dict[str, str] = spec.PROFILES
EXTENSIONS: dict[str, dict[str, Any]] = spec.EXTENSIONS
# The generator writes plain literals; this is their shape.
OPERATORS = cast("dict[str, OperatorSpec]", spec.OPERATORS)


@dataclass(frozen=True)
class ProfileReport:
    """What a graph needs: profiles, extensions, and what no TOSA 1.0 profile covers."""

    profiles: tuple[str, ...]
    extensions: tuple[str, ...]
    #: TOSA 1.1-draft operators present (no 1.0 profile has them)
    draft_operators: tuple[str, ...]
    #: operators whose element-type combination no 1.0 typesupport row matches
    unsupported: tuple[str, ...]

    def to_dict(self) -> dict[str, list[str]]:
        return {"profiles": list(self.profiles), "extensions": list(self.extensions),
                "draft_operators": list(self.draft_operators),
                "unsupported": list(self.unsupported)}


def _spec_operands(op: Operator) -> tuple[list[str], list[str]]:
    """The operator's tensors in the order of the specification's argument list."""
    if op.op == Op.VARIABLE_READ:  # the IR names the variable as input; the spec uses its uid
        return [], op.outputs
    if op.op == Op.VARIABLE_WRITE:
        return op.inputs[1:], []
    return op.inputs, op.outputs


def type_binding(block: Block, op: Operator) -> dict[str, DType] | None:
    """Type variable -> element type for ``op``; None if its operands contradict each other."""
    table = OPERATORS.get(op.op.name)
    if table is None:
        return None
    binding: dict[str, DType] = {}
    inputs, outputs = _spec_operands(op)
    pairs = list(zip(table["inputs"], inputs)) + list(zip(table["outputs"], outputs))
    for (_, element, arg_type), name in pairs:
        if arg_type != "tensor_t" or not element or name not in block.tensors:
            continue
        dtype = block.tensors[name].dtype
        if element in DType.__members__:
            if DType[element] != dtype:
                return None
        elif element in table["types"]:
            if binding.setdefault(element, dtype) != dtype:
                return None
    acc = getattr(op.attribute, "acc_type", None)
    if "acc_t" in table["types"] and acc is not None and acc != DType.UNKNOWN:
        binding["acc_t"] = DType(acc)
    return binding


def supported_rows(op: Op, binding: dict[str, DType]) -> list[SupportRow]:
    """The specification's typesupport rows of ``op`` matching ``binding``."""
    table = OPERATORS.get(op.name)
    if table is None:
        return []
    rows = []
    for mode, row, alternatives in table["support"]:
        if all(row.get(var) == dtype.name for var, dtype in binding.items()
               if var in row and row[var] in DType.__members__):
            rows.append((mode, row, alternatives))
    return rows


def describe_binding(binding: dict[str, DType]) -> str:
    return ", ".join(f"{var}={dtype.name}" for var, dtype in binding.items()) or "no typed operands"


def operator_requirements(block: Block, op: Operator,
                          constants: set[str] | None = None) -> list[frozenset[str]] | None:
    """Alternative requirement sets for one operator; None if no row supports it.

    ``constants``: :func:`block_constants` of ``block``, if the caller has it already."""
    binding = type_binding(block, op)
    if binding is None:
        return None
    rows = supported_rows(op.op, binding)
    if not rows:
        return None
    alternatives = {frozenset(alt) for _, _, alts in rows for alt in alts}
    extra: set[str] = set()
    if op.op == Op.RESCALE:
        mode = getattr(op.attribute, "rounding_mode", None)
        name = getattr(mode, "name", "")
        ext = spec.ENUM_EXTENSIONS.get(("rounding_mode_t", name))
        if ext:
            extra.add(ext)
    table = OPERATORS[op.op.name]
    inputs, _ = _spec_operands(op)
    if constants is None:
        constants = block_constants(block)
    for index in table["ctc_inputs"]:
        if index < len(inputs) and inputs[index] not in constants:
            extra.add("EXT-DYNAMIC")
    return sorted((alt | extra for alt in alternatives), key=lambda a: (len(a), sorted(a)))


def block_constants(block: Block) -> set[str]:
    """Names of the block's constant tensors (data, or produced by CONST/CONST_SHAPE)."""
    names = {n for n, t in block.tensors.items() if t.data is not None and not t.variable}
    for op in block.operators:
        if op.op in (Op.CONST, Op.CONST_SHAPE):
            names.update(op.outputs)
    return names


def _preferred(binding: dict[str, DType]) -> str:
    return "PRO-FP" if any(d.is_float for d in binding.values()) else "PRO-INT"


#: one operator's alternative requirement sets and the profile it prefers when free to choose
Choice = tuple[list[frozenset[str]], str]


def required_profiles(graph: Graph) -> ProfileReport:
    """The profiles and extensions ``graph`` needs (see the module docstring)."""
    choices: list[Choice] = []
    draft: set[str] = set()
    unsupported: list[str] = []
    for block in graph.blocks():
        _operator_choices(block, choices, draft, unsupported)
    _variable_choices(graph, choices, unsupported)
    chosen = _choose(choices)
    if graph.variables():  # even for element types no row covers (e.g. tosa-opt's int32 state)
        chosen.add("EXT-VARIABLE")
    _add_base_profiles(chosen)
    return ProfileReport(
        profiles=tuple(sorted(n for n in chosen if n.startswith("PRO-"))),
        extensions=tuple(sorted(n for n in chosen if n.startswith("EXT-"))),
        draft_operators=tuple(sorted(draft)),
        unsupported=tuple(unsupported))


def _operator_choices(block: Block, choices: list[Choice], draft: set[str], unsupported: list[str]) -> None:
    """Add the block's operators to ``choices`` (or to ``draft``/``unsupported``).

    An operator both profiles support (a CONST, an int32 ADD) counts for the profile of
    its own element types when free to choose.
    """
    constants = block_constants(block)
    for op in block.operators:
        if op.op not in TOSA_1_0_OPS:
            draft.add(op.op.name)
            continue
        alternatives = operator_requirements(block, op, constants)
        binding = type_binding(block, op)
        if alternatives is None:
            detail = describe_binding(binding) if binding is not None else "inconsistent types"
            unsupported.append(f"{op.name} in block {block.name!r}: {detail}")
        else:
            choices.append((alternatives, _preferred(binding or {})))


def _variable_choices(graph: Graph, choices: list[Choice], unsupported: list[str]) -> None:
    """Each variable counts as a VARIABLE declaration of its element type."""
    for tensor in graph.variables().values():
        rows = supported_rows(Op.VARIABLE, {"in_t": tensor.dtype})
        if rows:
            alternatives = sorted({frozenset(a) for _, _, alts in rows for a in alts}, key=sorted)
            choices.append((alternatives, _preferred({"in_t": tensor.dtype})))
        else:
            unsupported.append(f"variable {tensor.variable_key!r}: in_t={tensor.dtype.name}")


def _choose(choices: list[Choice]) -> set[str]:
    """A small requirement set meeting every choice; operators with fewer alternatives first."""
    chosen: set[str] = set()
    for alternatives, preferred in sorted(choices, key=lambda c: len(c[0])):
        if any(alt <= chosen for alt in alternatives):
            continue
        best = min(alternatives, key=lambda a: (len(a - chosen), preferred not in a, sorted(a)))
        chosen |= best
    return chosen


def _add_base_profiles(chosen: set[str]) -> None:
    """An extension needs one of the profiles it extends: add the first if none is chosen."""
    for name in sorted(n for n in chosen if n.startswith("EXT-")):
        bases = EXTENSIONS.get(name, {}).get("profiles", [])
        if bases and not chosen.intersection(bases):
            chosen.add(bases[0])
