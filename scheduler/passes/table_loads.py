"""Table loads behind the previous operation: a lookup's table is copied into the LUT memory while
the NPU operation before it computes.

Stage contract: takes the lowered graph in its final run order (after ``order_blocks``) and the
config's ``lut.table_load_behind_previous``; sets ``NpuOp.table_load_hidden_cycles`` on the LUT
operations whose table load that operation hides, in part or whole. Nothing else changes: the
lookup still reads its table's bytes (the bits), and :func:`npu_sim.hw.cost.compute_command_cycles`
charges its first tile only the rest of the load.

Vela 5.2 copies a table into the LUT memory by a DMA issued ahead of its lookup, and its estimate
charges the copy less the cycles of the operation before (regor network_performance.cpp:
lutTransferCycles less the previous operation's slackBufferingCycles, which scheduler.cpp sets to its
cycles). On the Ethos-U85 a lookup of an elementwise operation's result runs as that operation's
activation, in its operation group (ethos_u85.cpp, EthosU85OpGroup::Fuse): the group's operation
before hides the load. So an unrolled Keras GRU's lookups, each of an ADD after the step's two gate
products, cost Vela 0 cycles each on the U85, while a TOSA LSTM's lookup right after another lookup
pays most of its load (341 cycles; one after a RESCALE, 109).

The hiding operation's cycles are the cost model's estimate of it run whole
(:func:`scheduler.cost_model.whole_op_cycles`; a lookup's without its own table's load, a transfer
too). An operation on the host CPU hides nothing (the NPU waits for it), nor does the start of a
block or a control-flow operation.

With ``lut.fused_activation_table_loads_free`` (the U85) a lookup that Vela fuses into the operation
producing its input pays no load at all: the lookup is a sub-operation of that operation's group
(regor EthosU85OpGroup::Fuse, where scheduler_packing.cpp CanPack lets only a value with one writer and
one reader, no graph output, join a group, and an activation never follows an activation), and Vela's
estimate of a sub-operation is empty while its table stays its own input (network_performance.cpp:
AddToDatabase with no cost; the LUT transfer is counted only for the group's first operation). An
unrolled Keras GRU(16)'s tanh after its ADD: 4 cycles in Vela 5.2's per-layer estimate, the ADD's.
"""

from __future__ import annotations

from npu_sim.hw.compute_units import CPU, LUT, VECTOR
from npu_sim.hw.compute_units.lut import computes_built_in, table_load_cycles
from npu_sim.hw.config import HwConfig
from npu_sim.tosa.ops import Op
from scheduler.cost_model import whole_op_cycles
from scheduler.ir.npu_ops import LoweredBlock, LoweredGraph, NpuOp, OpKind


def mark_table_loads(lowered: LoweredGraph, hw: HwConfig) -> int:
    """Set ``NpuOp.table_load_hidden_cycles`` on the lookups of every block whose table load the
    operation before them hides (``lut.table_load_behind_previous``); how many."""
    if not hw.lut.table_load_behind_previous:
        return 0
    return sum(_mark_block(block, hw) for block in lowered.main.walk_blocks())


def _mark_block(block: LoweredBlock, hw: HwConfig) -> int:
    marked = 0
    computed: list[NpuOp] = []   # the NPU operations so far (since the last control flow)
    fused = _fused_activations(block) if hw.lut.fused_activation_table_loads_free else set()
    for op in block.ops:
        if op.kind in (OpKind.COND_IF, OpKind.WHILE_LOOP):
            computed = []
        if op.kind is not OpKind.COMPUTE:
            continue
        load = _table_load_cycles(hw, op)
        if load and id(op) in fused:
            op.table_load_hidden_cycles = load
            marked += 1
            computed.append(op)
            continue
        hiding = _hiding_operation(op, computed) if load else None
        if hiding is not None:
            hidden = min(load, int(whole_op_cycles(hw, hiding) - _table_load_cycles(hw, hiding)))
            if hidden > 0:
                op.table_load_hidden_cycles = hidden
                marked += 1
        computed.append(op)
    return marked


#: Steps Vela 5.2 runs as activations (regor op_type.hpp IsActivation: ReLUs and clamps, sigmoid, tanh,
#: lookups): a lookup never fuses into an operation that ends in one.
ACTIVATION_STEPS = frozenset({Op.CLAMP, Op.SIGMOID, Op.TANH, Op.TABLE})


def _fused_activations(block: LoweredBlock) -> set[int]:
    """The lookups of ``block`` (their ids) that run as the activation of the operation producing their
    input (:func:`_activation_of`)."""
    producers = {key: op for op in block.ops for key in op.outputs}
    readers: dict[str, int] = {}
    for op in block.ops:
        for key in set(op.inputs):
            readers[key] = readers.get(key, 0) + 1
    outputs = set(block.outputs)
    return {id(op) for op in block.ops if _activation_of(op, producers, readers, outputs)}


def _activation_of(op: NpuOp, producers: dict[str, NpuOp], readers: dict[str, int], outputs: set[str]) -> bool:
    """Whether ``op`` is a lookup on the LUT unit whose input value has that one reader, is no block
    output and comes from an NPU compute operation whose last step is no activation (an operation on
    the LUT unit with an elementwise step chained after its lookup may take another lookup)."""
    if op.kind is not OpKind.COMPUTE or op.unit != LUT.name or not op.steps or not op.steps[0].operands:
        return False
    source = op.steps[0].operands[0]
    if not isinstance(source, str):
        return False
    producer = producers.get(source)
    if producer is None or producer.kind is not OpKind.COMPUTE or producer.unit == CPU.name or not producer.steps:
        return False
    return producer.steps[-1].op not in ACTIVATION_STEPS and readers.get(source, 0) == 1 and source not in outputs


def _hiding_operation(lookup: NpuOp, computed: list[NpuOp]) -> NpuOp | None:
    """The operation whose cycles hide ``lookup``'s table load: the one before it, or, where that
    is the vector operation producing the lookup's input (the lookup its activation), the one
    before that; None at a block's start or after the host CPU."""
    if not computed:
        return None
    before: NpuOp | None = computed[-1]
    source = lookup.steps[0].operands[0] if lookup.steps and lookup.steps[0].operands else None
    if before is not None and before.unit == VECTOR.name and source in before.outputs:
        before = computed[-2] if len(computed) > 1 else None
    return None if before is None or before.unit == CPU.name else before


def _table_load_cycles(hw: HwConfig, op: NpuOp) -> int:
    """Cycles of the table loads of a lookup on the LUT unit (0 for any other operation, and for a
    lookup of a function the unit computes built in): a transfer, not the operation's work."""
    if op.unit != LUT.name or computes_built_in(hw, op.lut_function, op.steps):
        return 0
    return sum(table_load_cycles(hw, step) for step in op.steps)
