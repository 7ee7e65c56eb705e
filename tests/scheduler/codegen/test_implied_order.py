"""scheduler.codegen.implied_order: which buffer pairs may share TCM bytes without a new wait,
and the planner using it (cond_if on edge no longer waits for the selector's GREATER)."""

from pathlib import Path

import numpy as np

import npu_sim
from npu_sim.hw.config import load_hw_config
from npu_sim.inputs import random_array
from npu_sim.program import DmaCommand, KernelStep, MemorySpace
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ops import Op, make_attribute
from scheduler.codegen.compiler import CompileContext, compile_block, constant_pool_loads
from scheduler.codegen.emit import Emitter
from scheduler.codegen.implied_order import ImpliedOrder, implied_order
from scheduler.codegen.materialize import live_ranges, number
from scheduler.codegen.stream import ACompute, ACond, ADma
from scheduler.memory.buffers import Buffer, BufView
from scheduler.memory.fixed_placements import fixed_placements
from scheduler.memory.liveness import LiveRange
from scheduler.passes.tiling import Tiler
from scheduler.schedule import lower_graph, schedule
from scheduler.verify import verify_program

TCM, DDR = MemorySpace.TCM, MemorySpace.DDR
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _buf(name, size=16, memory=TCM, kind="activation"):
    return Buffer(name, memory, size, kind)


def _view(b, lo=0, hi=None):
    return BufView(b, lo, ((b.size_bytes if hi is None else hi) - lo,), DType.INT8)


def _dma(engine, src, dst):
    return ADma(engine, src if isinstance(src, BufView) else _view(src),
                dst if isinstance(dst, BufView) else _view(dst), "copy", 0)


def _compute(unit, reads, writes):
    step = KernelStep(Op.ADD, make_attribute(Op.ADD),
                      tuple(r if isinstance(r, BufView) else _view(r) for r in reads), (), ())
    return ACompute(unit, [step], [w if isinstance(w, BufView) else _view(w) for w in writes], unit, 0)


def _free(cmds):
    return implied_order(cmds, number(cmds).ids).reuse_test()


def test_one_compute_unit_orders_its_commands():
    x, y, out = _buf("x"), _buf("y"), _buf("out")
    for unit, free in (("vector", True), ("lut", False)):
        cmds = [_compute("vector", [], [x]),        # 0 writes x
                _compute("vector", [x], [out]),     # 1 last reads x
                _compute(unit, [], [y])]            # 2 first writes y: after 1 only on the same unit
        assert _free(cmds)(x.serial, y.serial) is free


def test_data_dependencies_order_commands_transitively():
    x, y, mid, out = _buf("x"), _buf("y"), _buf("mid"), _buf("out")
    cmds = [_compute("vector", [], [x]),
            _compute("vector", [x], [mid]),         # 1 last reads x
            _compute("mac_array", [mid], [out]),    # 2 waits for 1 (mid)
            _compute("lut", [out], [y])]            # 3 waits for 2, so for 1
    free = _free(cmds)
    assert free(x.serial, y.serial) and free(x.serial, out.serial)
    assert not free(y.serial, x.serial)             # the other way round nothing waits


def test_a_dma_engine_frees_before_its_data_lands():
    # the next DMA of an engine starts once the previous one issued its bursts: a store still
    # reading x does not order a load into x's bytes on the same engine
    x, y, ddr_x, ddr_y = _buf("x"), _buf("y"), _buf("dx", memory=DDR, kind="output"), \
        _buf("dy", memory=DDR, kind="input")
    cmds = [_compute("vector", [], [x]),
            _dma(0, x, ddr_x),                      # 1 store: last reads x
            _dma(0, ddr_y, y)]                      # 2 load: first writes y
    assert not _free(cmds)(x.serial, y.serial)
    # what the store waited for, the load waits for too (it queues behind the store's issue)
    z = _buf("z")
    cmds = [_compute("vector", [], [x]), _compute("vector", [x], [z]),   # 1 last reads x
            _dma(0, z, ddr_x),                      # 2 waits for 1
            _dma(0, ddr_y, y)]                      # 3 queues behind 2
    assert _free(cmds)(x.serial, y.serial)


def test_spans_keep_chunks_of_one_buffer_apart():
    # a constant pool loaded in chunks: reading chunk 0 and loading chunk 1 are not ordered, so
    # y (whose operation reads chunk 1) does not wait for x's last reader (which read chunk 0)
    pool, x, y, out = _buf("pool", 64, kind="constant"), _buf("x"), _buf("y"), _buf("out")
    c0, c1 = _buf("c0", 32, DDR, "constant"), _buf("c1", 32, DDR, "constant")
    cmds = [_dma(0, c0, _view(pool, 0, 32)),                          # 0 chunk 0
            _compute("vector", [_view(pool, 0, 16)], [x]),           # 1
            _compute("lut", [x, _view(pool, 16, 32)], [out]),        # 2 last reads x
            _dma(1, c1, _view(pool, 32, 64)),                         # 3 chunk 1
            _compute("mac_array", [_view(pool, 32, 48)], [y])]       # 4 first writes y
    assert not _free(cmds)(x.serial, y.serial)
    cmds[3] = _dma(1, c1, _view(pool, 16, 64))      # a chunk over bytes 2 read: 3 waits for 2
    assert _free(cmds)(x.serial, y.serial)


def test_control_flow_is_a_barrier_and_branches_never_wait():
    cond, x, then_out, else_out, after = _buf("cond"), _buf("x"), _buf("t"), _buf("e"), _buf("after")
    branch = ACond(_view(cond), [_compute("vector", [], [then_out])], [_compute("lut", [], [else_out])],
                   "if", 0)
    cmds = [_compute("vector", [], [cond]),
            _compute("mac_array", [], [x]),         # 1 x: not read by anything the branch reads
            branch,                                 # 2, then 3 (then) and 4 (else)
            _compute("lut", [], [after])]           # 5
    free = _free(cmds)
    assert free(x.serial, then_out.serial) and free(x.serial, else_out.serial)   # after the COND_IF
    assert free(then_out.serial, else_out.serial)   # only one branch runs
    assert free(then_out.serial, after.serial) and free(else_out.serial, after.serial)


def test_cond_if_on_edge_loads_its_operand_without_waiting_for_the_selector():
    # the compact plan used to put operand a on the bytes of the selector's tile, freed by GREATER
    # just before: "load a" waited for GREATER (1398 cycles). Now the tile sits on bytes only the
    # branches reuse, at the same 112-byte footprint, and the run takes what --spread-tcm gives.
    graph = npu_sim.load_graph(EXAMPLES / "cond_if_int32.tosa")
    hw = load_hw_config("edge")
    program = schedule(graph, hw)
    verify_program(program)
    assert program.stats.peak_tcm_bytes == program.stats.tcm_lower_bound_bytes == 112
    load_a = next(c for c in program.walk() if isinstance(c, DmaCommand) and c.name.endswith("load a"))
    assert load_a.deps == ()
    rng = np.random.default_rng(1)
    inputs = {name: random_array(t, rng) for name, t in graph.input_types.items()}
    result = npu_sim.simulate(graph, hw, inputs)
    assert result.summary["total_cycles"] == 897
    assert result.summary["peak_tcm_bytes"] == 112


def test_the_free_pairs_answer_what_the_pairwise_test_answers():
    # every pair of TCM buffers of a real stream (ds_cnn's tiles, weights and pool on tiny)
    hw = load_hw_config("tiny")
    lowered = lower_graph(npu_sim.load_graph(EXAMPLES / "ds_cnn_kws_int8.tosa"), hw)
    fixed = fixed_placements(lowered, hw, 16)
    ctx = CompileContext(lowered.values, fixed.placements, fixed.const_ddr, Tiler(hw, lambda k: None, 16),
                         Emitter(hw, 16), 16, 1000)
    cmds = compile_block(ctx, lowered.main, {}, hw.tcm.size_bytes, constant_pool_loads(fixed, ctx))
    numbering = number(cmds)
    order = sorted((LiveRange(serial, b.size_bytes, first, last)
                    for serial, (b, first, last) in live_ranges(cmds, numbering).items() if b.memory is TCM),
                   key=lambda r: (r.start, r.key))
    implied = implied_order(cmds, numbering.ids)
    free, matrix = implied.reuse_test(), implied.free_pairs(order).rows((0, len(order)), (0, len(order)))
    assert len(order) > 40 and matrix.shape == (len(order), len(order))
    expected = [[free(earlier.key, later.key) for earlier in order] for later in order]
    assert matrix.tolist() == expected
    assert 0 < matrix.sum() < len(order) ** 2 / 2    # some pairs are free, most are not


def test_free_pairs_of_any_wait_masks_are_the_pairwise_answers():
    # masks of a prefix and a few more bits, of many bits, none, with bits no buffer has; buffers
    # sharing a last command's bit, and buffers no command touches (never free)
    rng = np.random.default_rng(6)
    for case in range(40):
        n, bits = int(rng.integers(1, 30)), int(rng.integers(1, 200))
        last_bit = {key: int(rng.integers(0, bits)) for key in range(n) if rng.random() < 0.8}
        first_waits = {}
        for key in range(n):
            if rng.random() < 0.9:
                prefix = int(rng.integers(0, bits))
                more = rng.random(bits) < (0.6 if case % 4 == 0 else 0.05)
                first_waits[key] = (1 << prefix) - 1 | sum(1 << int(b) for b in np.flatnonzero(more))
        implied = ImpliedOrder(first_waits, last_bit)
        order = [LiveRange(key, 16, key, key) for key in rng.permutation(n).tolist()]
        free = implied.reuse_test()
        expected = [[free(earlier.key, later.key) for earlier in order] for later in order]
        assert implied.free_pairs(order).rows((0, n), (0, n)).tolist() == expected
