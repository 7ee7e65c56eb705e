"""The simulator: exact cycles against closed forms, real kernels on tiles, state, control flow, errors."""

from __future__ import annotations

import numpy as np
import pytest

from npu_sim.errors import InputError, MemoryAccessError, ProgramError, SimulationDeadlock, SimulationError
from npu_sim.hw.cost import compute_command_cycles
from npu_sim.program import Allocation, ComputeCommand, CondCommand, DmaCommand, KernelStep, Program, View
from npu_sim.reference.kernel_api import KernelArgs, input_window
from npu_sim.simulator import simulate_program
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from npu_sim.tosa.ops import Op, RoundingMode, make_attribute
from tests.hw.hw_programs import DDR, TCM, VAR, add_step, counting_loop, i32, make_hw, pipeline_program

SETUP, W, READ_LATENCY, WRITE_LATENCY = 10, 16, 100, 50  # make_hw()'s DMA and DDR figures


# --- double-buffered pipeline against a hand-written recurrence -------------------------------

def pipeline_ends(n: int, compute_cycles: int, tile_bytes: int):
    """End cycles of load/compute/store per tile, and when each DMA left its engine.

    DMAs are pipelined: an engine is free once its descriptor's last burst is issued
    (setup + data phase) and the data lands a latency later (the command's end).
    Load i+2 and store i both wait for compute i, so from tile 2 on they start
    together and split the DDR, each moving its bytes at W/2."""
    solo, both = tile_bytes // W, 2 * tile_bytes // W
    li, le, ce, si, se = ([0] * n for _ in range(5))
    for i in range(n):
        load_start = max(li[i - 1] if i else 0, ce[i - 2] if i >= 2 else 0)
        li[i] = load_start + SETUP + (both if i >= 2 else solo)
        le[i] = li[i] + READ_LATENCY
        ce[i] = max(le[i], ce[i - 1] if i else 0, se[i - 2] if i >= 2 else 0) + compute_cycles
        store_start = max(ce[i], si[i - 1] if i else 0)
        si[i] = store_start + SETUP + (both if i + 2 < n else solo)
        se[i] = si[i] + WRITE_LATENCY
    return li, le, ce, si, se


def _ends(result, prefix: str, n: int, attribute: str = "end_cycle") -> list[int]:
    by_name = {c.name: c for c in result.trace.commands}
    return [getattr(by_name[f"{prefix}{i}"], attribute) for i in range(n)]


@pytest.mark.parametrize("vector_setup", [8, 176])
def test_double_buffered_pipeline_matches_the_recurrence(vector_setup):
    n, elements = 12, 64  # 256-byte tiles: 4 bursts, 16 cycles alone on the bus
    hw = make_hw(vector={"setup_cycles": vector_setup})
    program, x = pipeline_program(n, elements)
    compute = compute_command_cycles(hw, program.commands[1])
    assert compute == vector_setup + max(64 // 8, 3 * 256 // 32)  # lanes vs TCM bound (24)
    result = simulate_program(program, hw, [{"x": x}])
    li, le, ce, si, se = pipeline_ends(n, compute, 256)
    assert _ends(result, "load", n, "busy_end_cycle") == li
    assert _ends(result, "load", n) == le
    assert _ends(result, "add", n) == ce
    assert _ends(result, "store", n, "busy_end_cycle") == si
    assert _ends(result, "store", n) == se
    assert result.total_cycles == se[-1] == result.per_invocation_cycles[0]
    np.testing.assert_array_equal(result.outputs[0]["y"], 2 * x)
    starts = {c.name: c.start_cycle for c in result.trace.commands}
    # the regime the recurrence assumes: load i+2 and store i start together
    assert all(starts[f"load{i + 2}"] == starts[f"store{i}"] for i in range(n - 2))
    assert starts["load1"] == li[0] < le[0]  # the second load was issued while the first was in flight
    counters = result.counters
    assert counters.ddr_read_bytes == counters.ddr_write_bytes == n * 256
    assert counters.busy_cycles["vector"] == n * compute
    assert counters.busy_cycles["dma0"] == sum(li[i] - starts[f"load{i}"] for i in range(n))
    assert counters.command_counts == {"dma0": n, "dma1": n, "mac_array": 0, "vector": n, "lut": 0, "cpu": 0}


def _chain_program(count: int, tile_bytes: int) -> Program:
    """``count`` independent loads of ``tile_bytes`` on dma0, each into its own TCM bytes."""
    elements = tile_bytes // 4
    commands = [DmaCommand(k, 0, i32(DDR, k * tile_bytes, elements), i32(TCM, k * tile_bytes, elements),
                           name=f"load{k}") for k in range(count)]
    return Program({DDR: count * tile_bytes, TCM: count * tile_bytes}, [], commands,
                   inputs={"x": i32(DDR, 0, count * elements)})


def test_a_chain_of_small_dmas_on_one_engine_pays_the_latency_once():
    n, tile = 6, 256  # each: setup 10 + 16 cycles of data, then 100 cycles of read latency
    result = simulate_program(_chain_program(n, tile), make_hw(), [{"x": np.arange(n * 64, dtype=np.int32)}])
    loads = sorted(result.trace.commands, key=lambda c: c.id)
    assert [c.start_cycle for c in loads] == [26 * k for k in range(n)]
    assert [c.busy_end_cycle for c in loads] == [26 * (k + 1) for k in range(n)]
    assert [c.end_cycle for c in loads] == [26 * (k + 1) + READ_LATENCY for k in range(n)]
    assert result.total_cycles == n * 26 + READ_LATENCY  # not n * (26 + 100)
    assert result.counters.busy_cycles["dma0"] == n * 26


def test_the_outstanding_burst_limit_holds_across_pipelined_descriptors():
    # 2 outstanding 64-byte bursts, round trip 100 + 64/16 = 104 cycles: at most 128/104 B/cycle
    hw = make_hw(dma={"max_outstanding_bursts": 2})
    n, tile = 3, 256
    result = simulate_program(_chain_program(n, tile), hw, [{"x": np.arange(n * 64, dtype=np.int32)}])
    loads = sorted(result.trace.commands, key=lambda c: c.id)
    issue = 10 + 256 * 104 // 128  # 218: setup + 256 bytes at 128/104 B/cycle
    assert [c.busy_end_cycle for c in loads] == [issue * (k + 1) for k in range(n)]
    assert [c.end_cycle for c in loads] == [issue * (k + 1) + READ_LATENCY for k in range(n)]
    # bytes in flight (issued within the last round trip) never exceed the 2 bursts
    phases = [(c.start_cycle + 10, c.busy_end_cycle) for c in loads]
    for t in range(0, result.total_cycles + 1):
        in_flight = sum(tile * max(0, min(b, t) - max(a, t - 104)) / (b - a) for a, b in phases)
        assert in_flight <= 2 * 64 + 1e-9, t


def test_allocation_uses_and_peak_bytes():
    hw = make_hw()
    program, x = pipeline_program(4, 16)
    result = simulate_program(program, hw, [{"x": x}])
    uses = {a.name: a for a in result.trace.allocations}
    by_name = {c.name: c for c in result.trace.commands}
    assert uses["in0"].first_cycle == 0
    assert uses["in0"].last_cycle == by_name["add2"].end_cycle  # load0, add0, load2, add2
    assert uses["out1"].first_cycle == by_name["add1"].start_cycle
    assert uses["out1"].last_cycle == by_name["store3"].end_cycle
    assert result.trace.peak_live_bytes("tcm") == 4 * 64


def test_runs_are_deterministic():
    hw = make_hw(dma={"max_outstanding_bursts": 3})
    program, x = pipeline_program(10, 48)
    first = simulate_program(program, hw, [{"x": x}, {"x": -x}])
    second = simulate_program(program, hw, [{"x": x}, {"x": -x}])
    assert first.trace.commands == second.trace.commands
    assert first.trace.allocations == second.trace.allocations
    assert first.per_invocation_cycles == second.per_invocation_cycles
    assert len(first.per_invocation_cycles) == 2
    np.testing.assert_array_equal(first.outputs[1]["y"], -2 * x)


# --- MAC array: a CONV2D in tiles, and a fused CONV2D + RESCALE ------------------------------

X_TYPE = TensorType((1, 4, 4, 8), DType.INT8)
W_TYPE = TensorType((16, 3, 3, 8), DType.INT8)
B_TYPE = TensorType((16,), DType.INT32)
ZP_TYPE = TensorType((1,), DType.INT8)
ACC_TYPE = TensorType((1, 4, 4, 16), DType.INT32)
CONV = make_attribute(Op.CONV2D, pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1), acc_type=DType.INT32)


def _conv_data():
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, X_TYPE.shape).astype(np.int8)
    w = rng.integers(-128, 128, W_TYPE.shape).astype(np.int8)
    bias = rng.integers(-1000, 1000, B_TYPE.shape).astype(np.int32)
    return x, w, bias


def _numpy_conv(x, w, bias):
    padded = np.pad(x.astype(np.int64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros(ACC_TYPE.shape, np.int64)
    for y in range(4):
        for xx in range(4):
            window = padded[0, y:y + 3, xx:xx + 3, :]
            out[0, y, xx, :] = np.tensordot(w.astype(np.int64), window, axes=([1, 2, 3], [0, 1, 2]))
    return (out + bias).astype(np.int32)


def _conv_constants(w, bias):
    """Weights, bias and zero points as TCM allocations with initial data; their views."""
    layout = {"w": (256, W_TYPE), "bias": (1536, B_TYPE), "izp": (1600, ZP_TYPE), "wzp": (1604, ZP_TYPE)}
    data = {"w": w.tobytes(), "bias": bias.tobytes(), "izp": b"\x00", "wzp": b"\x00"}
    allocations = [Allocation(name, TCM, off, t.size_bytes, "constant", initial_data=data[name])
                   for name, (off, t) in layout.items()]
    views = {name: View(TCM, off, t.shape, t.dtype) for name, (off, t) in layout.items()}
    return allocations, views


def test_conv2d_in_two_tiles_on_the_mac_array():
    hw = make_hw()  # 4 x 8 array, setup 5
    x, w, bias = _conv_data()
    allocations, c = _conv_constants(w, bias)
    x_ddr, x_tcm = View(DDR, 0, X_TYPE.shape, DType.INT8), View(TCM, 0, X_TYPE.shape, DType.INT8)
    out_tcm = View(TCM, 2048, ACC_TYPE.shape, DType.INT32)
    out_ddr = View(DDR, 1024, ACC_TYPE.shape, DType.INT32)
    types = (X_TYPE, W_TYPE, B_TYPE, ZP_TYPE, ZP_TYPE)
    commands = [DmaCommand(0, 0, x_ddr, x_tcm, name="load x")]
    for tile, (r0, r1) in enumerate([(0, 2), (2, 4)]):
        region = ((0, 1), (r0, r1), (0, 4), (0, 16))
        windows = input_window(KernelArgs(Op.CONV2D, CONV, [], list(types), [ACC_TYPE]), region)
        (_, _), (h0, h1), _, _ = windows[0]
        x_window = View(TCM, h0 * 4 * 8, (1, h1 - h0, 4, 8), DType.INT8)
        step = KernelStep(Op.CONV2D, CONV, (x_window, c["w"], c["bias"], c["izp"], c["wzp"]), types,
                          (ACC_TYPE,), out_region=region,
                          input_offsets=((0, h0, 0, 0), (0, 0, 0, 0), (0,), (0,), (0,)))
        out_tile = View(TCM, 2048 + r0 * 4 * 16 * 4, (1, r1 - r0, 4, 16), DType.INT32)
        commands.append(ComputeCommand(1 + tile, "mac_array", (step,), (out_tile,), deps=(0,),
                                       name=f"conv rows {r0}-{r1}"))
    commands.append(DmaCommand(3, 1, out_tcm, out_ddr, deps=(1, 2), name="store"))
    program = Program({DDR: 2048, TCM: 4096}, allocations, commands,
                      inputs={"x": x_ddr}, outputs={"acc": out_ddr})
    result = simulate_program(program, hw, [{"x": x}])
    np.testing.assert_array_equal(result.outputs[0]["acc"], _numpy_conv(x, w, bias))
    tiles = [r for r in result.trace.commands if r.unit == "mac_array"]
    # each tile: M = 8 output pixels, N = 16 channels, K = 3*3*8 = 72 on a 4 x 8 array: 4 blocks,
    # double-buffered: 3 back to back, the last with the array's skew
    assert [r.cycles for r in tiles] == [5 + 3 * 72 + (72 + 4 + 8 - 2)] * 2
    assert [r.macs for r in tiles] == [8 * 16 * 72] * 2
    assert tiles[1].start_cycle == tiles[0].end_cycle  # one array: in order


def test_fused_conv_rescale_chains_the_accumulator_inside_the_unit():
    hw = make_hw()
    x, w, bias = _conv_data()
    allocations, c = _conv_constants(w, bias)
    rescale_consts = {"mul": (1700, TensorType((16,), DType.INT32), np.full(16, 1 << 30, np.int32)),
                      "shift": (1800, TensorType((16,), DType.INT8), np.full(16, 38, np.int8)),
                      "rizp": (1820, TensorType((1,), DType.INT32), np.zeros(1, np.int32)),
                      "rozp": (1830, TensorType((1,), DType.INT8), np.array([3], np.int8))}
    for name, (off, t, value) in rescale_consts.items():
        allocations.append(Allocation(name, TCM, off, t.size_bytes, "constant", initial_data=value.tobytes()))
        c[name] = View(TCM, off, t.shape, t.dtype)
    out_type = TensorType(ACC_TYPE.shape, DType.INT8)
    conv = KernelStep(Op.CONV2D, CONV, (View(TCM, 0, X_TYPE.shape, DType.INT8), c["w"], c["bias"], c["izp"],
                                        c["wzp"]), (X_TYPE, W_TYPE, B_TYPE, ZP_TYPE, ZP_TYPE), (ACC_TYPE,))
    rescale_attr = make_attribute(Op.RESCALE, scale32=True, per_channel=True,
                                  rounding_mode=RoundingMode.SINGLE_ROUND)
    rescale = KernelStep(Op.RESCALE, rescale_attr, (0, c["mul"], c["shift"], c["rizp"], c["rozp"]),
                         (ACC_TYPE,) + tuple(t for _, t, _ in rescale_consts.values()), (out_type,))
    out_tcm, out_ddr = View(TCM, 2048, out_type.shape, DType.INT8), View(DDR, 1024, out_type.shape, DType.INT8)
    x_ddr = View(DDR, 0, X_TYPE.shape, DType.INT8)
    commands = [DmaCommand(0, 0, x_ddr, View(TCM, 0, X_TYPE.shape, DType.INT8)),
                ComputeCommand(1, "mac_array", (conv, rescale), (out_tcm,), deps=(0,), name="conv+rescale"),
                DmaCommand(2, 0, out_tcm, out_ddr, deps=(1,))]
    program = Program({DDR: 2048, TCM: 4096}, allocations, commands, inputs={"x": x_ddr},
                      outputs={"y": out_ddr})
    result = simulate_program(program, hw, [{"x": x}])
    acc = _numpy_conv(x, w, bias).astype(np.int64)
    # multiplier 2^30 with shift 38: round(acc / 2^8) (single rounding: add 2^37, shift 38), +3, clamp
    expected = np.clip(((acc * (1 << 30) + (1 << 37)) >> 38) + 3, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(result.outputs[0]["y"], expected)
    fused = next(r for r in result.trace.commands if r.name == "conv+rescale")
    assert fused.op == "CONV2D+RESCALE"
    # the epilogue is pipelined behind the array: only the last 4 x 8 output block's
    # drain (32 results at 8 a cycle) follows the array's 4 * 2 blocks (7 back to back, the
    # last with the skew)
    assert fused.cycles == 5 + 7 * 72 + (72 + 4 + 8 - 2) + (4 * 8) // 8


# --- state across invocations -------------------------------------------------------------------

def accumulator_program(initial: bytes | None) -> Program:
    state, x_ddr, y_ddr = View(VAR, 0, (4,), DType.INT32), i32(DDR, 0, 4), i32(DDR, 16, 4)
    acc, x_tcm, total = i32(TCM, 0, 4), i32(TCM, 16, 4), i32(TCM, 32, 4)
    commands = [DmaCommand(0, 0, state, acc, name="read state"),
                DmaCommand(1, 1, x_ddr, x_tcm, name="load x"),
                ComputeCommand(2, "vector", (add_step(acc, x_tcm, (4,)),), (total,), deps=(0, 1), name="add"),
                DmaCommand(3, 0, total, state, deps=(2,), name="write state"),
                DmaCommand(4, 1, total, y_ddr, deps=(2,), name="store")]
    return Program({DDR: 64, TCM: 64, VAR: 16},
                   [Allocation("state", VAR, 0, 16, "variable", initial_data=initial)], commands,
                   inputs={"x": x_ddr}, outputs={"y": y_ddr}, variables={"state": state})


def test_variable_sram_keeps_its_contents_across_invocations():
    xs = [np.array([1, 2, 3, 4], np.int32), np.array([10, 20, 30, 40], np.int32), np.array([-5, 0, 5, 9], np.int32)]
    result = simulate_program(accumulator_program(bytes(16)), make_hw(), [{"x": x} for x in xs])
    np.testing.assert_array_equal([o["y"] for o in result.outputs], np.cumsum(xs, axis=0))
    np.testing.assert_array_equal(result.variables["state"], sum(xs))
    assert len(result.per_invocation_cycles) == 3
    assert result.total_cycles == sum(result.per_invocation_cycles)
    invocations = result.trace.invocations
    assert invocations[1].start_cycle == invocations[0].end_cycle


def test_reading_a_variable_never_written_fails_naming_the_command():
    with pytest.raises(MemoryAccessError, match=r"^command 0 \(read state\): reads var_sram\[0x0\] 4 INT32 "
                                                 r"element \[0\], which was never written$"):
        simulate_program(accumulator_program(None), make_hw(), [{"x": np.zeros(4, np.int32)}])


# --- control flow ---------------------------------------------------------------------------------

def cond_program(dependent_on_then: bool = False) -> Program:
    flag_ddr, flag_tcm = View(DDR, 0, (1,), DType.BOOL), View(TCM, 0, (1,), DType.BOOL)
    a, b, y = i32(DDR, 16, 4), i32(DDR, 32, 4), i32(DDR, 48, 4)
    then = (DmaCommand(2, 0, a, i32(TCM, 16, 4), name="take a"),)
    other = (DmaCommand(3, 0, b, i32(TCM, 16, 4), name="take b"),)
    commands = [DmaCommand(0, 1, flag_ddr, flag_tcm, name="load flag"),
                CondCommand(1, flag_tcm, then, other, deps=(0,), name="if flag"),
                DmaCommand(4, 1, i32(TCM, 16, 4), y, deps=(2,) if dependent_on_then else (1,), name="store")]
    return Program({DDR: 64, TCM: 64}, [], commands,
                   inputs={"flag": flag_ddr, "a": a, "b": b}, outputs={"y": y})


def _cond_inputs(flag: bool) -> dict[str, np.ndarray]:
    return {"flag": np.array([flag]), "a": np.arange(4, dtype=np.int32), "b": np.arange(4, 8, dtype=np.int32)}


def test_cond_runs_the_branch_the_condition_bytes_choose():
    result = simulate_program(cond_program(), make_hw(), [_cond_inputs(True), _cond_inputs(False)])
    np.testing.assert_array_equal(result.outputs[0]["y"], [0, 1, 2, 3])
    np.testing.assert_array_equal(result.outputs[1]["y"], [4, 5, 6, 7])
    names = [[c.name for c in result.trace.commands if c.invocation == k] for k in (0, 1)]
    assert "take a" in names[0] and "take b" not in names[0]
    assert "take b" in names[1] and "take a" not in names[1]
    cond = next(c for c in result.trace.commands if c.kind == "cond")
    take = next(c for c in result.trace.commands if c.name == "take a")
    assert (cond.unit, cond.op, cond.end_cycle) == ("sequencer", "if", take.end_cycle)


def test_dependency_on_a_branch_not_taken_is_a_deadlock():
    program = cond_program(dependent_on_then=True)
    simulate_program(program, make_hw(), [_cond_inputs(True)])  # fine when the branch runs
    with pytest.raises(SimulationDeadlock, match=r"command 4 \(store\) on dma1 waits for command 2 "
                                                 r"\(take a\) \(never issued in this invocation\)"):
        simulate_program(program, make_hw(), [_cond_inputs(False)])




def test_loop_runs_until_the_condition_is_false():
    result = simulate_program(counting_loop(10, one_engine=1), make_hw(), [{"n": np.array([5], np.int32)}])
    assert result.outputs[0]["i"].tolist() == [5]
    names = [c.name for c in result.trace.commands]
    assert names.count("i += 1") == 5 and names.count("n > i") == 6
    loop = next(c for c in result.trace.commands if c.kind == "loop")
    last_check = max(c.end_cycle for c in result.trace.commands if c.name == "n > i")
    assert loop.end_cycle == last_check
    store = next(c for c in result.trace.commands if c.name == "store i")
    assert store.start_cycle == loop.end_cycle


def test_loop_over_max_iterations_is_an_error():
    with pytest.raises(SimulationError, match=r"command 3 \(while\): loop exceeded max_iterations=3"):
        simulate_program(counting_loop(3, one_engine=1), make_hw(), [{"n": np.array([5], np.int32)}])


# --- refusals -------------------------------------------------------------------------------------

def test_inputs_are_checked():
    program, x = pipeline_program(2, 4)
    hw = make_hw()
    with pytest.raises(InputError, match=r"invocation 0: missing input\(s\) \['x'\]"):
        simulate_program(program, hw, [{}])
    with pytest.raises(InputError, match=r"input 'x' has shape \[4\], expected \[8\]"):
        simulate_program(program, hw, [{"x": x[:4]}])
    with pytest.raises(InputError, match=r"input 'x' has dtype int64, expected int32"):
        simulate_program(program, hw, [{"x": x.astype(np.int64)}])
    with pytest.raises(InputError, match=r"unknown input\(s\) \['z'\]"):
        simulate_program(program, hw, [{"x": x, "z": x}])


def test_program_errors():
    hw = make_hw()
    x_ddr = i32(DDR, 0, 4)
    in_ddr = ComputeCommand(0, "vector", (add_step(x_ddr, x_ddr, (4,)),), (i32(TCM, 0, 4),), name="add")
    with pytest.raises(ProgramError, match=r"command 0 \(add\): step 0 operand 0 is in ddr; compute units "
                                           r"read only the TCM"):
        simulate_program(Program({DDR: 16, TCM: 16}, [], [in_ddr]), hw, [{}])
    with pytest.raises(ProgramError, match=r"the program plans 65537 bytes of tcm; test has 65536"):
        simulate_program(Program({DDR: 16, TCM: 65537}, [], []), hw, [{}])
    later = DmaCommand(0, 0, x_ddr, i32(TCM, 0, 4), deps=(1,))
    with pytest.raises(ProgramError, match="depends on unknown or later command 1"):  # Program.validate
        simulate_program(Program({DDR: 16, TCM: 16}, [], [later]), hw, [{}])
    wrong_unit = ComputeCommand(0, "npu", (add_step(i32(TCM, 0, 1), i32(TCM, 0, 1), (1,)),), (i32(TCM, 4, 1),))
    with pytest.raises(ProgramError, match="unknown compute unit 'npu'"):
        simulate_program(Program({TCM: 16}, [], [wrong_unit]), hw, [{}])


def test_a_command_depending_on_its_enclosing_control_command_is_refused():
    flag = View(TCM, 0, (1,), DType.BOOL)
    inner = DmaCommand(1, 0, i32(TCM, 16, 1), i32(TCM, 32, 1), deps=(0,), name="inner")
    program = Program({TCM: 64}, [], [CondCommand(0, flag, (inner,), (), name="if")])
    with pytest.raises(ProgramError, match=r"command 1 \(inner\) depends on command 0, which encloses it"):
        simulate_program(program, make_hw(), [{}])


def test_an_output_never_written_is_reported_by_name():
    y = i32(DDR, 0, 2)
    program = Program({DDR: 8}, [], [], outputs={"y": y})
    with pytest.raises(MemoryAccessError, match=r"^invocation 0: graph output 'y': reads ddr\[0x0\] 2 INT32 "
                                                 r"element \[0\], which was never written$"):
        simulate_program(program, make_hw(), [{}])


def test_a_shared_compute_pipeline_runs_one_compute_command_at_a_time():
    """Two independent commands on the vector and the LUT unit overlap, unless the config says
    the units are stages of one pipeline (as on Ethos-U)."""
    a = i32(TCM, 0, 64)
    i8 = DType.INT8
    lookup = KernelStep(Op.TABLE, make_attribute(Op.TABLE), (View(TCM, 512, (64,), i8), View(TCM, 1024, (256,), i8)),
                        (TensorType((64,), i8), TensorType((256,), i8)), (TensorType((64,), i8),))
    commands = [ComputeCommand(0, "vector", (add_step(a, a, (64,)),), (i32(TCM, 256, 64),), name="add"),
                ComputeCommand(1, "lut", (lookup,), (View(TCM, 1536, (64,), i8),), name="table")]
    program = Program({TCM: 2048}, [Allocation("all", TCM, 0, 2048, "constant", initial_data=bytes(2048))], commands)
    spans = {}
    for shared in (False, True):
        hw = make_hw(shared_compute_pipeline=shared)
        trace = simulate_program(program, hw, [{}]).trace
        spans[shared] = {c.name: (c.start_cycle, c.end_cycle) for c in trace.commands}
        cycles = [compute_command_cycles(hw, c) for c in commands]
    assert spans[False]["add"][0] == spans[False]["table"][0] == 0
    assert spans[True]["add"] == (0, cycles[0]) and spans[True]["table"] == (cycles[0], cycles[0] + cycles[1])
