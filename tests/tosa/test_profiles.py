"""Required TOSA profiles and extensions, from the specification's typesupport tables."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from npu_sim.tosa import DType, GraphBuilder, Op, load_graph, profiles_generated, required_profiles
from npu_sim.tosa.ops import RoundingMode

SPEC_GIT = os.environ.get("TOSA_SPEC_GIT", "/work/.mirror/arm+tosa-specification/repo")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.skipif(not Path(SPEC_GIT).exists(), reason="no local mirror of the TOSA specification")
def test_generated_tables_are_those_of_the_specification():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "gen_tosa_profiles", Path(__file__).resolve().parents[2] / "tools" / "gen_tosa_profiles.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    xml = subprocess.run(["git", "-C", SPEC_GIT, "show", "v1.0.1:tosa.xml"], check=True,
                         capture_output=True, text=True).stdout
    data = gen.parse(xml)
    assert data["OPERATORS"] == profiles_generated.OPERATORS
    assert data["EXTENSIONS"] == profiles_generated.EXTENSIONS
    assert data["ENUM_EXTENSIONS"] == profiles_generated.ENUM_EXTENSIONS


def _conv(in_dtype, weight_dtype, out_dtype, acc_dtype, validate=True):
    b = GraphBuilder()
    x = b.input("x", (1, 2, 2, 1), in_dtype)
    w = b.const("w", np.ones((1, 1, 1, 1)), weight_dtype)
    bias = b.const("bias", np.zeros(1), out_dtype)
    izp = b.const("izp", 0, in_dtype)
    wzp = b.const("wzp", 0, weight_dtype)
    b.output(b.op(Op.CONV2D, [x, w, bias, izp, wzp], (1, 2, 2, 1), out_dtype, pad=(0, 0, 0, 0),
                  stride=(1, 1), dilation=(1, 1), acc_type=acc_dtype))
    return required_profiles(b.build(validate=validate))


@pytest.mark.parametrize("types, profiles, extensions", [
    ((DType.INT8, DType.INT8, DType.INT32, DType.INT32), ["PRO-INT"], []),
    ((DType.INT8, DType.INT4, DType.INT32, DType.INT32), ["PRO-INT"], ["EXT-INT4"]),
    ((DType.INT16, DType.INT8, DType.INT48, DType.INT48), ["PRO-INT"], ["EXT-INT16"]),
    ((DType.FP16, DType.FP16, DType.FP16, DType.FP32), ["PRO-FP"], []),
    ((DType.BF16, DType.BF16, DType.BF16, DType.FP32), ["PRO-FP"], ["EXT-BF16"]),
    ((DType.FP8E4M3, DType.FP8E4M3, DType.FP16, DType.FP16), ["PRO-FP"], ["EXT-FP8E4M3"]),
    ((DType.FP8E5M2, DType.FP8E5M2, DType.FP16, DType.FP16), ["PRO-FP"], ["EXT-FP8E5M2"]),
])
def test_convolution_types_select_profile_and_extension(types, profiles, extensions):
    report = _conv(*types)
    assert list(report.profiles) == profiles and list(report.extensions) == extensions
    assert report.unsupported == ()


def test_unsupported_combination_is_reported():
    report = _conv(DType.INT8, DType.INT8, DType.INT32, DType.INT48, validate=False)
    assert report.unsupported and "acc_t=INT48" in report.unsupported[0]


def _rescale(rounding, const_zero_point=True):
    b = GraphBuilder()
    x = b.input("x", (4,), DType.INT32)
    izp = b.const("izp", 0, DType.INT32) if const_zero_point else b.input("izp", (1,), DType.INT32)
    b.output(b.op(Op.RESCALE, [x, b.const("m", 1 << 30, DType.INT32), b.const("s", 31, DType.INT8),
                               izp, b.const("ozp", 0, DType.INT8)], (4,), DType.INT8,
                  scale32=True, rounding_mode=rounding))
    return required_profiles(b.build())


def test_rescale_rounding_modes_and_dynamic_zero_points():
    assert _rescale(RoundingMode.SINGLE_ROUND).extensions == ()
    assert _rescale(RoundingMode.DOUBLE_ROUND).extensions == ("EXT-DOUBLEROUND",)
    assert _rescale(RoundingMode.INEXACT_ROUND).extensions == ("EXT-INEXACTROUND",)
    assert _rescale(RoundingMode.SINGLE_ROUND, const_zero_point=False).extensions == \
        ("EXT-DYNAMIC",)


def test_fft_control_flow_and_variables():
    b = GraphBuilder()
    re_ = b.input("re", (1, 4, 4), DType.FP32)
    im = b.input("im", (1, 4, 4), DType.FP32)
    b.output(*b.op(Op.FFT2D, [re_, im], outputs=[((1, 4, 4), DType.FP32)] * 2, inverse=False))
    report = required_profiles(b.build())
    assert report.profiles == ("PRO-FP",) and report.extensions == ("EXT-FFT",)

    b = GraphBuilder()
    x = b.input("x", (4,), DType.INT8)
    flag = b.input("flag", (1,), DType.BOOL)
    v = b.variable("v", (4,), DType.INT8, np.zeros(4, np.int8))
    b.variable_write(v, x)
    b.output(*b.cond_if(flag, [x], lambda bb, a: a, lambda bb, a: a))
    report = required_profiles(b.build())
    assert report.profiles == ("PRO-INT",)
    assert report.extensions == ("EXT-CONTROLFLOW", "EXT-VARIABLE")


def test_shared_operators_count_for_their_own_kind():
    b = GraphBuilder()
    x = b.input("x", (4,), DType.INT32)
    b.output(b.op(Op.ADD, [x, x]))  # int32 ADD is in both profiles
    assert required_profiles(b.build()).profiles == ("PRO-INT",)
    b = GraphBuilder()
    x = b.input("x", (4,), DType.FP32)
    b.output(b.op(Op.ADD, [x, b.const("c", np.ones(4, np.float32))]))
    assert required_profiles(b.build()).profiles == ("PRO-FP",)


def test_draft_operators_are_listed():
    b = GraphBuilder(version=(1, 1, 0, True))
    x = b.input("x", (1, 2, 3), DType.FP32)
    b.output(b.op(Op.MATMUL_T, [x, x], (1, 2, 2), DType.FP32))
    assert required_profiles(b.build()).draft_operators == ("MATMUL_T",)


@pytest.mark.skipif(not (EXAMPLES / "ds_cnn_kws_int8.tosa").exists(), reason="example missing")
def test_real_models():
    ds_cnn = required_profiles(load_graph(EXAMPLES / "ds_cnn_kws_int8.tosa"))
    # the int8 softmax goes through int16 tables; TFLite rescales round twice
    assert ds_cnn.profiles == ("PRO-INT",)
    assert ds_cnn.extensions == ("EXT-DOUBLEROUND", "EXT-INT16")
    lstm = required_profiles(load_graph(EXAMPLES / "lstm_stateful_int8.tosa"))
    assert lstm.profiles == ("PRO-INT",)
    assert lstm.extensions == ("EXT-DOUBLEROUND", "EXT-VARIABLE") and lstm.unsupported == ()

