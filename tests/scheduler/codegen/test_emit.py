from npu_sim.program import MemorySpace
from npu_sim.tosa.dtype import DType
from npu_sim.tosa.ir import TensorType
from scheduler.codegen.emit import Emitter
from scheduler.codegen.stream import ACompute, ADma, dma_pieces
from scheduler.ir.npu_ops import ValueKind
from scheduler.memory.buffers import Buffer, BufView, Placement
from scheduler.passes.lowering import lower
from scheduler.passes.tiling import Tiler
from tests.scheduler.graphs import machine, small_cnn

DDR, TCM = MemorySpace.DDR, MemorySpace.TCM


def test_dma_pieces_merge_and_split():
    ddr, tcm = Buffer("t", DDR, 4096), Buffer("b", TCM, 4096)
    full = Placement(ddr, 0, TensorType((1, 8, 8, 4), DType.INT8))
    # rows 2..5, all columns: one contiguous run of 4*8*4 bytes
    (piece,) = dma_pieces(full.window(((0, 1), (2, 6), (0, 8), (0, 4))), BufView(tcm, 0, (1, 4, 8, 4), DType.INT8))
    assert piece[0].shape == (128,) and piece[0].offset_bytes == 64
    # a 2x3 window of columns: 2 rows of 12-byte runs
    (piece,) = dma_pieces(full.window(((0, 1), (0, 2), (1, 4), (0, 4))), BufView(tcm, 0, (1, 2, 3, 4), DType.INT8))
    assert piece[0].shape == (2, 12) and piece[0].strides_bytes == (32, 1)
    # four strided levels on both sides: split along the outermost
    big = Placement(ddr, 0, TensorType((3, 4, 5, 6), DType.INT8))
    window = big.window(((0, 2), (0, 3), (0, 4), (0, 5)))
    strided = BufView(tcm, 0, (2, 3, 4, 5), DType.INT8, (200, 50, 10, 1))
    pieces = dma_pieces(window, strided)
    assert [p[0].shape for p in pieces] == [(3, 4, 5), (3, 4, 5)]
    assert [p[0].offset_bytes for p in pieces] == [0, 120] and [p[1].offset_bytes for p in pieces] == [0, 200]


def test_copy_paths():
    hw = machine("edge")
    em = Emitter(hw, 16)
    t = TensorType((8, 64), DType.INT8)
    ddr_a, ddr_b = Placement(Buffer("a", DDR, 512), 0, t), Placement(Buffer("b", DDR, 512), 0, t)
    tcm_a, tcm_b = Placement(Buffer("c", TCM, 512), 0, t), Placement(Buffer("d", TCM, 512), 0, t)
    (load,) = em.copy(ddr_a, tcm_a, "load", 0, 0)
    assert isinstance(load, ADma) and load.src.shape == (512,)
    banded = em.copy(ddr_a, tcm_a, "load", 0, 0, bands=4)
    assert [c.dst.offset_bytes for c in banded] == [0, 128, 256, 384]
    (ident,) = em.copy(tcm_a, tcm_b, "move", 0, 0)
    assert isinstance(ident, ACompute) and ident.unit == "vector" and ident.steps[0].op.name == "IDENTITY"
    staged = em.copy(ddr_a, ddr_b, "spill", 0, 512)
    assert [(c.src.memory, c.dst.memory) for c in staged] == [(DDR, TCM), (TCM, DDR)] * 2
    assert [c.engine for c in staged][1::2] == [1, 1]          # stores on the last engine


def test_constant_loads_on_the_first_engine_when_the_config_says_so():
    t = TensorType((8, 64), DType.INT8)
    weights = [Placement(Buffer(f"w{i}", DDR, 512, kind="constant"), 0, t) for i in range(4)]
    maps = [Placement(Buffer(f"x{i}", DDR, 512, kind="activation"), 0, t) for i in range(4)]
    tcm = Placement(Buffer("tile", TCM, 512), 0, t)

    def engines(hw):
        em = Emitter(hw, 16)
        return [cmd.engine for p in weights + maps for cmd in em.copy(p, tcm, "load", 0, 0)]

    edge = machine("edge")
    assert engines(edge) == [0, 1, 0, 1, 0, 1, 0, 1]   # balanced: the least loaded engine
    one_channel = edge.model_copy(update={"dma": edge.dma.model_copy(update={"constants_on_first_engine": True})})
    # the weights queue on engine 0, the feature maps then balance over both (engine 1 first)
    assert engines(one_channel) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert machine("ethos-u85-256").dma.constants_on_first_engine


def test_compute_ping_pong():
    lowered = lower(small_cnn(8))
    values = lowered.values
    op = lowered.main.ops[0]
    tiler = Tiler(machine("tiny"), lambda k: values[k].data if values[k].kind is ValueKind.CONSTANT else None)
    plan = tiler.plan(op, lambda k: values[k].kind is ValueKind.CONSTANT, 700)
    assert plan.tile_count > 2
    places = {k: Placement(Buffer(k, TCM if values[k].kind is ValueKind.CONSTANT else DDR, 4096), 0, values[k].type)
              for k in (*op.inputs, *op.outputs)}
    cmds = Emitter(machine("tiny"), 16).compute(op, plan, places.__getitem__, tiler.tiling(op).windows, 0)
    computes = [c for c in cmds if isinstance(c, ACompute)]
    loads = [c for c in cmds if isinstance(c, ADma) and c.dst.memory is TCM]
    stores = [c for c in cmds if isinstance(c, ADma) and c.dst.memory is DDR]
    assert len(computes) == len(stores) == plan.tile_count
    assert len(loads) == plan.tile_count                  # only the image window changes per tile
    buffers = [c.dst.buffer for c in loads]
    assert buffers[0] is not buffers[1] and buffers[0] is buffers[2]   # ping, pong, ping
    outs = [c.outputs[0].buffer for c in computes]
    assert outs[0] is not outs[1] and outs[0] is outs[2]
    assert sum(c.macs for c in computes) == op.macs


def test_a_thin_feature_map_is_read_in_the_npus_accesses_where_the_config_says():
    """ethos-u85-256 reads a feature map in DDR whose pixels are narrower than 16 elements (a
    3-channel image) in accesses of 16 elements; a 16-channel one, constants, and any read on edge,
    in whole bursts. The scheduled image input carries it to its DMAs, and stays bit-exact: the
    convolution's own loads of its tiles where the input lives in the DRAM (tcm.graph_inputs_in_place,
    the preset), and the copy staging it into the TCM without that flag."""
    from npu_sim.hw.config import load_hw_config
    from npu_sim.tosa.builder import GraphBuilder
    from tests.scheduler.graphs import check_end_to_end, conv_block

    ddr = Buffer("t", DDR, 1 << 16)
    u85 = Emitter(load_hw_config("ethos-u85-256"), 16)
    edge = Emitter(load_hw_config("edge"), 16)
    image = Placement(ddr, 0, TensorType((1, 8, 8, 3), DType.INT8)).whole()
    deep = Placement(ddr, 0, TensorType((1, 8, 8, 16), DType.INT8)).whole()
    assert u85.thin_pixel_access_bytes(image) == 16
    assert u85.thin_pixel_access_bytes(deep) == 0
    # 16 elements an access, as the NPU's block fetches: 32 B of an int16 image (Vela's burst spans the
    # IFM block's depth of elements), and an 8-channel int16 map (16 B a pixel) is thin too
    assert u85.thin_pixel_access_bytes(Placement(ddr, 0, TensorType((1, 8, 8, 3), DType.INT16)).whole()) == 32
    assert u85.thin_pixel_access_bytes(Placement(ddr, 0, TensorType((1, 8, 8, 8), DType.INT16)).whole()) == 32
    assert u85.thin_pixel_access_bytes(Placement(ddr, 0, TensorType((1, 8, 8, 16), DType.INT16)).whole()) == 0
    assert edge.thin_pixel_access_bytes(image) == 0
    weights = Placement(Buffer("w", DDR, 1024, kind="constant"), 0, TensorType((3, 3, 32, 1), DType.INT8)).whole()
    assert u85.thin_pixel_access_bytes(weights) == 0   # depthwise weights stream as stored

    b = GraphBuilder()
    b.output(conv_block(b, b.input("x", (1, 12, 12, 3), DType.INT8), 8, seed=3))
    hw = machine("ethos-u85-256")
    staged = hw.model_copy(update={"tcm": hw.tcm.model_copy(update={"graph_inputs_in_place": False})})
    for config, image_load in ((hw, "CONV2D(conv2d_3)+RESCALE(rescale_8)+CLAMP(clamp_9): load x"), (staged, "stage x")):
        program, _ = check_end_to_end(b.build(), config)
        loads = [c for c in program.walk() if getattr(c, "src", None) is not None and c.src.memory is DDR]
        image_loads = [c for c in loads if c.name == image_load]
        assert image_loads and all(c.access_bytes == 16 for c in image_loads)
        assert all(c.access_bytes == 0 for c in loads if c not in image_loads)
