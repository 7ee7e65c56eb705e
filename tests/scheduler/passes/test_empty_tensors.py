"""Empty tensors converters leave behind run in ``run`` and ``plan`` as in ``exec``: what
computes nothing is dropped, a CONCAT forgets its empty inputs, the rest is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import npu_sim
from npu_sim.errors import UnsupportedFeatureError
from npu_sim.tosa.mlir_reader import read_mlir
from scheduler.passes.empty_tensors import drop_empty_tensors

LEFTOVER = """
func.func @main(%x: tensor<1x12xf32>) -> tensor<1x12xf32> {
  %e = "tosa.const"() <{values = dense<> : tensor<1x0xf32>}> : () -> tensor<1x0xf32>
  %s = tosa.sigmoid %e : (tensor<1x0xf32>) -> tensor<1x0xf32>
  %c = tosa.concat %x, %s {axis = 1 : i32} : (tensor<1x12xf32>, tensor<1x0xf32>) -> tensor<1x12xf32>
  %y = tosa.add %c, %x : (tensor<1x12xf32>, tensor<1x12xf32>) -> tensor<1x12xf32>
  return %y : tensor<1x12xf32>
}
"""


def test_a_graph_with_an_empty_leftover_runs_on_the_npu_with_the_executors_bits():
    graph = read_mlir(LEFTOVER)
    x = np.random.default_rng(0).normal(size=(1, 12)).astype(np.float32)
    result = npu_sim.simulate(graph, "edge", [x])
    np.testing.assert_array_equal(result.outputs["TosaOutput_0"], npu_sim.execute(graph, [x])["TosaOutput_0"])
    kept = drop_empty_tensors(graph).main
    assert [op.op.name for op in kept.operators] == ["IDENTITY", "ADD"]
    assert len(graph.main.operators) == 4   # the graph given is unchanged


def test_an_operator_computing_from_an_empty_tensor_is_refused_by_name():
    text = LEFTOVER.replace("%c = tosa.concat %x, %s {axis = 1 : i32} : (tensor<1x12xf32>, tensor<1x0xf32>)",
                            "%c = tosa.pad %s, %p, %z : (tensor<1x0xf32>, !tosa.shape<4>, tensor<1xf32>)")
    pads = ('%p = tosa.const_shape {values = dense<[0, 0, 0, 12]> : tensor<4xindex>} : () -> !tosa.shape<4>\n'
            '  %z = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>\n')
    text = text.replace('%e = "tosa.const"', pads + '  %e = "tosa.const"')
    graph = read_mlir(text)
    with pytest.raises(UnsupportedFeatureError, match="reads the empty tensor"):
        npu_sim.simulate(graph, "edge", [np.zeros((1, 12), np.float32)])
