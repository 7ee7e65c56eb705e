#!/usr/bin/env python3
"""Build small, hand-made TOSA example graphs with tosa-tools' serializer.

Usage::

    python examples/build_serializer_examples.py --out examples/

Needs only ``tosa-tools==2026.8.0`` (Python modules ``tosa_serializer`` and
``tosa_reference_model``; its ``bin/tosa-opt`` is used, when found, to also
write a readable ``.mlir`` next to each graph).  Like
``generate_examples.py`` it is never needed by the test suite: the outputs
are committed.

Every graph is built deterministically (fixed seeds) and then executed with
``tosa_reference_model.run`` against a NumPy re-computation of what the graph
should do; the script fails loudly on any mismatch.  Graphs:

* ``conv_rescale_int8.tosa``   CONV2D int8 (input/weight zero points, int32
  bias) -> per-channel RESCALE int32->int8 -> CLAMP (ReLU at the output zero
  point).
* ``add_mul_fp32.tosa``        ADD, MUL, MAXIMUM in fp32 with rank-preserving
  broadcasting.
* ``cond_if_int32.tosa``       GREATER on a rank-0 selector, COND_IF choosing
  ADD (then) or SUB (else).
* ``while_loop_int32.tosa``    WHILE_LOOP counting i from 0 to n, adding x to
  an accumulator each iteration.
* ``variable_counter_int32.tosa`` persistent int32 state: variable read, ADD,
  variable write (accumulates across invocations).

About variables: the TOSA schema has VARIABLE / VARIABLE_READ /
VARIABLE_WRITE op codes, but neither tosa-opt's serializer nor the reference
model (2026.8.0) use them.  A variable is a block tensor with ``variable =
true``, a ``variable_name`` and its initial value in ``data``; reads and
writes are IDENTITY operators whose attribute is a ``VariableReadAttribute``
/ ``VariableWriteAttribute`` (write: input = new value, output = the variable
tensor).  The reference model rejects the explicit op codes ("OpFactory could
not allocate op VARIABLE_READ"), so this script writes the encoding that real
tools produce and accept.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:
    import tosa_reference_model as trm
    import tosa_serializer as ts
except ImportError as exc:  # pragma: no cover - only without tosa-tools
    raise SystemExit(f"error: needs tosa-tools (pip install tosa-tools==2026.8.0): {exc}") from exc

DT = ts.DType
OP = ts.Op
SEED = 20240601


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------


def _attr(method: str, *args) -> ts.TosaSerializerAttribute:
    a = ts.TosaSerializerAttribute()
    getattr(a, method)(*args)
    return a


def _le_bytes(value, np_dtype) -> list[int]:
    """Little-endian bytes of one scalar, as CLAMP's min/max attributes want."""
    return list(np.array([value], dtype=np_dtype).view(np.uint8))


def _new_serializer() -> ts.TosaSerializer:
    # Default target version = the library's TOSA 1.1.0 draft; constants
    # are embedded in the flatbuffer.
    return ts.TosaSerializer("", ts.ConstMode.EMBED)


def _main_block(ser):
    return ser.currRegion.currBasicBlock


def _input(ser, name, shape, dtype):
    blk = _main_block(ser)
    blk.addTensor(name, shape, dtype)
    blk.addInput(name)
    return name


def _const(ser, name, shape, dtype, values):
    ser.addConst(list(shape), dtype, np.asarray(values).reshape(shape), name)
    return name


def _tensor(ser, name, shape, dtype):
    ser.currRegion.currBasicBlock.addTensor(name, list(shape), dtype)
    return name


def _output(ser, name):
    ser.currRegion.currBasicBlock.addOutput(name)


def _quant_multiplier(scale: float) -> tuple[int, int]:
    """Split a positive real scale into (int32 multiplier, shift) as used by
    TOSA RESCALE with scale32: scale ~= multiplier * 2**-shift."""
    mant, exp = np.frexp(scale)  # scale = mant * 2**exp, mant in [0.5, 1)
    mult = int(round(mant * (1 << 31)))
    shift = 31 - int(exp)
    if mult == 1 << 31:
        mult //= 2
        shift -= 1
    assert 2 <= shift <= 62, shift
    return mult, shift


def _ref_rescale(x, mult, shift, in_zp, out_zp, lo, hi):
    """NumPy model of TOSA RESCALE (scale32, DOUBLE_ROUND), per element."""
    x = x.astype(np.int64) - in_zp
    mult = np.asarray(mult, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    rnd = np.int64(1) << (shift - 1)
    rnd = np.where((shift > 31) & (x >= 0), rnd + (np.int64(1) << 30), rnd)
    rnd = np.where((shift > 31) & (x < 0), rnd - (np.int64(1) << 30), rnd)
    y = (x * mult + rnd) >> shift
    return np.clip(y + out_zp, lo, hi)


# --------------------------------------------------------------------------
# graphs: each returns (serialized bytes, [inputs], [expected outputs])
# --------------------------------------------------------------------------


def build_conv_rescale_int8(rng):
    N, H, W, C, OC, K = 1, 8, 8, 3, 4, 3
    in_zp, w_zp, out_zp = -7, 3, 5
    ser = _new_serializer()
    x = _input(ser, "input", [N, H, W, C], DT.INT8)
    w_val = rng.integers(-127, 128, size=(OC, K, K, C), dtype=np.int64)
    b_val = rng.integers(-3000, 3000, size=(OC,), dtype=np.int64)
    w = _const(ser, "weights", w_val.shape, DT.INT8, w_val)
    b = _const(ser, "bias", [OC], DT.INT32, b_val)
    izp = _const(ser, "input_zp", [1], DT.INT8, [in_zp])
    wzp = _const(ser, "weight_zp", [1], DT.INT8, [w_zp])
    acc = _tensor(ser, "conv_acc", [N, H, W, OC], DT.INT32)
    ser.addOperator(OP.CONV2D, [x, w, b, izp, wzp], [acc],
                    _attr("Conv2dAttribute", [1, 1, 1, 1], [1, 1], [1, 1], False,
                          DT.INT32))
    # Per-output-channel requantization scales (~ 2**-8 .. 2**-7).
    scales = [0.0041, 0.0057, 0.0069, 0.0083]
    mults, shifts = zip(*(_quant_multiplier(s) for s in scales))
    m = _const(ser, "rescale_multiplier", [OC], DT.INT32, mults)
    s = _const(ser, "rescale_shift", [OC], DT.INT8, shifts)
    rizp = _const(ser, "rescale_input_zp", [1], DT.INT32, [0])
    rozp = _const(ser, "rescale_output_zp", [1], DT.INT8, [out_zp])
    q = _tensor(ser, "requantized", [N, H, W, OC], DT.INT8)
    ser.addOperator(OP.RESCALE, [acc, m, s, rizp, rozp], [q],
                    _attr("RescaleAttribute", True, ts.RoundingMode.DOUBLE_ROUND,
                          True, False, False))
    y = _tensor(ser, "output", [N, H, W, OC], DT.INT8)
    ser.addOperator(OP.CLAMP, [q], [y],
                    _attr("ClampAttribute", _le_bytes(out_zp, np.int8),
                          _le_bytes(127, np.int8), ts.NanPropagationMode.PROPAGATE))
    _output(ser, y)

    x_val = rng.integers(-128, 128, size=(N, H, W, C), dtype=np.int64).astype(np.int8)
    xp = np.pad(x_val.astype(np.int64) - in_zp, ((0, 0), (1, 1), (1, 1), (0, 0)))
    wk = w_val - w_zp
    acc_ref = np.zeros((N, H, W, OC), dtype=np.int64)
    for ky in range(K):
        for kx in range(K):
            acc_ref += np.einsum("nhwc,oc->nhwo", xp[:, ky:ky + H, kx:kx + W, :],
                                 wk[:, ky, kx, :])
    acc_ref += b_val
    q_ref = _ref_rescale(acc_ref, mults, shifts, 0, out_zp, -128, 127)
    y_ref = np.clip(q_ref, out_zp, 127).astype(np.int8)
    return ser.serialize(), [x_val], [y_ref]


def build_add_mul_fp32(rng):
    ser = _new_serializer()
    a = _input(ser, "a", [1, 4, 4, 8], DT.FP32)
    b = _input(ser, "b", [1, 1, 1, 8], DT.FP32)
    c_val = np.array([0.5, -1.0, 2.0, 0.25], dtype=np.float32).reshape(1, 4, 1, 1)
    c = _const(ser, "c", [1, 4, 1, 1], DT.FP32, c_val)
    shift = _const(ser, "mul_shift", [1], DT.INT8, [0])  # must be 0 for fp MUL
    zero = _const(ser, "zero", [1, 1, 1, 1], DT.FP32, [0.0])
    s = _tensor(ser, "sum", [1, 4, 4, 8], DT.FP32)
    p = _tensor(ser, "product", [1, 4, 4, 8], DT.FP32)
    y = _tensor(ser, "output", [1, 4, 4, 8], DT.FP32)
    ser.addOperator(OP.ADD, [a, b], [s], _attr("AddAttribute"))
    ser.addOperator(OP.MUL, [s, c, shift], [p], _attr("MulAttribute"))
    ser.addOperator(OP.MAXIMUM, [p, zero], [y],
                    _attr("MaximumAttribute", ts.NanPropagationMode.PROPAGATE))
    _output(ser, y)

    a_val = rng.standard_normal((1, 4, 4, 8)).astype(np.float32)
    b_val = rng.standard_normal((1, 1, 1, 8)).astype(np.float32)
    y_ref = np.maximum((a_val + b_val) * c_val, np.float32(0))
    return ser.serialize(), [a_val, b_val], [y_ref]


def build_cond_if_int32(rng, selector: int):
    ser = _new_serializer()
    sel = _input(ser, "selector", [], DT.INT32)
    a = _input(ser, "a", [2, 3], DT.INT32)
    b = _input(ser, "b", [2, 3], DT.INT32)
    zero = _const(ser, "zero", [], DT.INT32, 0)
    cond = _tensor(ser, "cond", [], DT.BOOL)
    y = _tensor(ser, "output", [2, 3], DT.INT32)
    ser.addOperator(OP.GREATER, [sel, zero], [cond], _attr("GreaterAttribute"))
    ser.addOperator(OP.COND_IF, [cond, a, b], [y],
                    _attr("CondIfAttribute", "then_branch", "else_branch"))
    _output(ser, y)
    # Each branch is a basic block in a region of its own, named like the
    # block (the convention of the serializer / reference model).  Block
    # inputs bind positionally to COND_IF's inputs after the condition.
    for block, op, attr in (("then_branch", OP.ADD, "AddAttribute"),
                            ("else_branch", OP.SUB, "SubAttribute")):
        ser.startRegion(block)
        ser.addBasicBlock(block)
        blk = ser.currRegion.currBasicBlock
        for n in ("a", "b"):
            blk.addTensor(n, [2, 3], DT.INT32)
            blk.addInput(n)
        r = _tensor(ser, "result", [2, 3], DT.INT32)
        ser.addOperator(op, ["a", "b"], [r], _attr(attr))
        _output(ser, r)

    a_val = rng.integers(-1000, 1000, size=(2, 3)).astype(np.int32)
    b_val = rng.integers(-1000, 1000, size=(2, 3)).astype(np.int32)
    s_val = np.array(selector, dtype=np.int32)
    y_ref = a_val + b_val if selector > 0 else a_val - b_val
    return ser.serialize(), [s_val, a_val, b_val], [y_ref]


def build_while_loop_int32(rng, n: int):
    ser = _new_serializer()
    x = _input(ser, "x", [4], DT.INT32)
    nn = _input(ser, "n", [], DT.INT32)
    i0 = _const(ser, "i_init", [], DT.INT32, 0)
    acc0 = _const(ser, "acc_init", [4], DT.INT32, np.zeros(4))
    loop_vars = [("i", [], DT.INT32), ("n", [], DT.INT32), ("x", [4], DT.INT32),
                 ("acc", [4], DT.INT32)]
    outs = [_tensor(ser, f"{v}_final", shp, dt) for v, shp, dt in loop_vars]
    ser.addOperator(OP.WHILE_LOOP, [i0, nn, x, acc0], outs,
                    _attr("WhileLoopAttribute", "cond_block", "body_block"))
    _output(ser, "acc_final")
    _output(ser, "i_final")

    def start_block(name):
        ser.startRegion(name)
        ser.addBasicBlock(name)
        blk = ser.currRegion.currBasicBlock
        for v, shp, dt in loop_vars:
            blk.addTensor(v, shp, dt)
            blk.addInput(v)

    # cond: keep looping while i < n
    start_block("cond_block")
    c = _tensor(ser, "keep_going", [], DT.BOOL)
    ser.addOperator(OP.GREATER, ["n", "i"], [c], _attr("GreaterAttribute"))
    _output(ser, c)
    # body: i += 1; acc += x; n and x pass through unchanged
    start_block("body_block")
    one = _const(ser, "one", [], DT.INT32, 1)
    i1 = _tensor(ser, "i_next", [], DT.INT32)
    a1 = _tensor(ser, "acc_next", [4], DT.INT32)
    ser.addOperator(OP.ADD, ["i", one], [i1], _attr("AddAttribute"))
    ser.addOperator(OP.ADD, ["acc", "x"], [a1], _attr("AddAttribute"))
    for name in (i1, "n", "x", a1):
        _output(ser, name)

    x_val = rng.integers(-100, 100, size=(4,)).astype(np.int32)
    n_val = np.array(n, dtype=np.int32)
    return ser.serialize(), [x_val, n_val], [x_val * max(n, 0),
                                             np.array(max(n, 0), np.int32)]


VAR_SHAPE = [1, 4]
VAR_TENSOR = "counter_state"
VAR_NAME = "counter"


def build_variable_counter_int32(rng):
    ser = _new_serializer()
    inc = _input(ser, "increment", VAR_SHAPE, DT.INT32)
    blk = _main_block(ser)
    # The variable: a block tensor flagged variable, with its name and its
    # initial value (zeros) as data.
    blk.addTensor(VAR_TENSOR, VAR_SHAPE, DT.INT32, np.zeros(VAR_SHAPE, np.int32),
                  "", False, True, VAR_NAME)
    cur = _tensor(ser, "state_read", VAR_SHAPE, DT.INT32)
    new = _tensor(ser, "state_next", VAR_SHAPE, DT.INT32)
    ser.addOperator(OP.IDENTITY, [VAR_TENSOR], [cur], _attr("VariableReadAttribute"))
    ser.addOperator(OP.ADD, [cur, inc], [new], _attr("AddAttribute"))
    ser.addOperator(OP.IDENTITY, [new], [VAR_TENSOR], _attr("VariableWriteAttribute"))
    _output(ser, new)

    inc_val = np.array([[1, 2, 3, -4]], dtype=np.int32)
    return ser.serialize(), [inc_val], [inc_val.copy()]


# --------------------------------------------------------------------------
# checking
# --------------------------------------------------------------------------


def _check_ref(name, blob, inputs, expected):
    outs, status = trm.run(bytes(blob), [np.ascontiguousarray(i) for i in inputs])
    if status != trm.GraphStatus.TOSA_VALID:
        raise SystemExit(f"error: {name}: reference model status {status}")
    if len(outs) != len(expected):
        raise SystemExit(f"error: {name}: {len(outs)} outputs, expected {len(expected)}")
    for k, (got, want) in enumerate(zip(outs, expected)):
        got = np.asarray(got)
        if got.shape != want.shape or not np.array_equal(got, want.astype(got.dtype)):
            raise SystemExit(f"error: {name}: output {k} mismatch\n got {got}\n want {want}")


def _find_ref_cli() -> str | None:
    cand = [shutil.which("tosa_reference_model"),
            str(Path(sys.executable).parent / "tosa_reference_model")]
    return next((c for c in cand if c and Path(c).is_file()), None)


def check_variable_state_cli(tosa_path: Path, steps: int = 3) -> list[np.ndarray] | None:
    """Invoke the reference model CLI ``steps`` times, carrying the variable
    across invocations through numpy state files.

    The python ``run()`` API always starts from the initial value stored in
    the flatbuffer and cannot return variable values, so only the CLI can
    show state persisting.  Quirks of the 2026.8.0 CLI (test descriptor
    keys ``variable_name`` / ``variable_file``; names are *tensor* names, not
    ``variable_name`` attributes):

    * loading state (``--initialize_variable_tensor_from_numpy 1``) needs
      ``variable_file`` as a JSON list;
    * saving state after the run only works with ``variable_file`` as a plain
      string (a list fails with "type must be string, but is array"), hence
      for single-variable graphs only.

    So step 0 starts from the stored initial value and saves the variable;
    every later step loads the previous state file.
    """
    cli = _find_ref_cli()
    if cli is None:
        print("  (tosa_reference_model CLI not found: skipping state check)")
        return None
    inc = np.array([[1, 2, 3, -4]], dtype=np.int32)
    outs = []
    with tempfile.TemporaryDirectory() as td:
        tdp = Path(td)
        shutil.copyfile(tosa_path, tdp / "g.tosa")
        np.save(tdp / "inc.npy", inc)
        for step in range(steps):
            desc = {"tosa_file": "g.tosa", "ifm_name": ["increment"],
                    "ifm_file": ["inc.npy"], "ofm_name": ["state_next"],
                    "ofm_file": [f"out_{step}.npy"], "variable_name": [VAR_TENSOR]}
            cmd = [cli, "--test_desc", str(tdp / "run.json")]
            if step == 0:
                desc["variable_file"] = "state_1.npy"  # save after the run
            else:
                desc["variable_file"] = [f"state_{step}.npy"]  # load before
                cmd += ["--initialize_variable_tensor_from_numpy", "1"]
            (tdp / "run.json").write_text(json.dumps(desc))
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0 or not (tdp / f"out_{step}.npy").exists():
                print(proc.stdout + proc.stderr)
                raise SystemExit("error: reference model CLI failed")
            out = np.load(tdp / f"out_{step}.npy")
            outs.append(out)
            if step == 0:
                saved = np.load(tdp / "state_1.npy")
                if not np.array_equal(saved, out):
                    raise SystemExit(f"error: saved variable {saved} != output {out}")
            else:
                # The graph returns exactly what it writes to the variable.
                np.save(tdp / f"state_{step + 1}.npy", out)
    for k, o in enumerate(outs):
        if not np.array_equal(o, inc * (k + 1)):
            raise SystemExit(f"error: variable state step {k}: {o} != {inc * (k + 1)}")
    return outs


def _find_tosa_opt(explicit: str | None) -> str | None:
    cand = [explicit, os.environ.get("TOSA_OPT"), shutil.which("tosa-opt"),
            str(Path(sys.executable).parent / "tosa-opt")]
    return next((c for c in cand if c and Path(c).is_file()), None)


def write_mlir(tosa_opt: str, tosa_path: Path) -> Path:
    """Deserialize with tosa-opt into readable MLIR (also proves tosa-opt
    accepts the file)."""
    mlir_path = tosa_path.with_suffix(".mlir")
    with tempfile.TemporaryDirectory() as td:
        empty = Path(td) / "empty.mlir"
        empty.write_text("module {}\n")
        shutil.copyfile(tosa_path, Path(td) / tosa_path.name)
        proc = subprocess.run(
            [tosa_opt, f"--tosa-deserialize=tosa-flatbuffer-filename={tosa_path.name}",
             empty.name, "-o", str(mlir_path.resolve())],
            capture_output=True, text=True, cwd=td)
    if proc.returncode != 0:
        raise SystemExit(f"error: tosa-opt could not deserialize {tosa_path.name}:\n"
                         f"{proc.stdout}{proc.stderr}")
    return mlir_path


# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent,
                    help="output directory (default: this script's folder)")
    ap.add_argument("--tosa-opt", help="tosa-opt binary used to write .mlir views")
    ap.add_argument("--no-mlir", action="store_true", help="do not write .mlir views")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    rng = np.random.default_rng(SEED)
    graphs = {}
    blob, ins, exp = build_conv_rescale_int8(rng)
    graphs["conv_rescale_int8"] = blob
    _check_ref("conv_rescale_int8", blob, ins, exp)

    blob, ins, exp = build_add_mul_fp32(rng)
    graphs["add_mul_fp32"] = blob
    _check_ref("add_mul_fp32", blob, ins, exp)

    for sel in (3, -2, 0):
        blob, ins, exp = build_cond_if_int32(np.random.default_rng(SEED + 1), sel)
        _check_ref(f"cond_if_int32[selector={sel}]", blob, ins, exp)
    graphs["cond_if_int32"] = blob  # graph is identical for every selector

    for n in (5, 0, 1):
        blob, ins, exp = build_while_loop_int32(np.random.default_rng(SEED + 2), n)
        _check_ref(f"while_loop_int32[n={n}]", blob, ins, exp)
    graphs["while_loop_int32"] = blob

    blob, ins, exp = build_variable_counter_int32(rng)
    graphs["variable_counter_int32"] = blob
    _check_ref("variable_counter_int32", blob, ins, exp)

    tosa_opt = None if args.no_mlir else _find_tosa_opt(args.tosa_opt)
    for name, blob in graphs.items():
        path = args.out / f"{name}.tosa"
        path.write_bytes(bytes(blob))
        extra = ""
        if tosa_opt:
            extra = f" (+ {write_mlir(tosa_opt, path).name})"
        print(f"  {path.name}: {path.stat().st_size} bytes{extra}")

    outs = check_variable_state_cli(args.out / "variable_counter_int32.tosa")
    if outs is not None:
        print("  variable_counter_int32 state across 3 CLI invocations: "
              + " -> ".join(str(o.ravel().tolist()) for o in outs))
    print(f"done in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
