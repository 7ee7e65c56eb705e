"""The row update of a loop's sequence buffer (two dynamic ``tfl.slice`` around the new row)
written as an EQUAL and a SELECT; other uses of ``tfl.slice`` stay as they are."""

from npu_sim.tosa.tflite.row_update import rewrite

BODY = """    %20 = "tosa.const"() <{values = dense<0> : tensor<3xi32>}> : () -> tensor<3xi32>
    %22 = "tosa.const"() <{values = dense<-1> : tensor<3xi32>}> : () -> tensor<3xi32>
      %57 = tosa.reshape %arg2, %4 : (tensor<i32>, !tosa.shape<1>) -> tensor<1xi32>
      %58 = tosa.concat %57, %19 {axis = 0 : i32} : (tensor<1xi32>, tensor<2xi32>) -> tensor<3xi32>
      %59 = "tfl.slice"(%arg3, %20, %58) : (tensor<4x1x3xf32>, tensor<3xi32>, tensor<3xi32>) -> tensor<?x?x?xf32>
      %60 = tosa.reshape %31, %4 : (tensor<i32>, !tosa.shape<1>) -> tensor<1xi32>
      %61 = tosa.concat %60, %21 {axis = 0 : i32} : (tensor<1xi32>, tensor<2xi32>) -> tensor<3xi32>
      %62 = "tfl.slice"(%arg3, %61, %22) : (tensor<4x1x3xf32>, tensor<3xi32>, tensor<3xi32>) -> tensor<?x1x3xf32>
      %64 = tosa.concat %59, %63, %62 {axis = 0 : i32} : """ \
    """(tensor<?x?x?xf32>, tensor<1x1x3xf32>, tensor<?x1x3xf32>) -> tensor<4x1x3xf32>
      tosa.yield %64 : tensor<4x1x3xf32>"""


def test_the_row_update_becomes_a_select_of_the_row_at_the_counter():
    out = rewrite(BODY)
    assert "tfl.slice" not in out
    assert "dense<[0, 1, 2, 3]> : tensor<4xi32>" in out
    assert "%row_update_64_index = tosa.reshape %57," in out
    assert "%64 = tosa.select %row_update_64_mask, %63, %arg3 : (tensor<4x1x1xi1>, tensor<1x1x3xf32>, " \
           "tensor<4x1x3xf32>) -> tensor<4x1x3xf32>" in out


def test_a_slice_from_another_start_or_read_elsewhere_stays():
    moved = BODY.replace('"tfl.slice"(%arg3, %20, %58)', '"tfl.slice"(%arg3, %22, %58)')
    assert rewrite(moved) == moved
    read_twice = BODY + "\n      %65 = tosa.add %59, %59 : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?x?xf32>"
    assert rewrite(read_twice) == read_twice


def test_an_integer_buffer_in_a_graph_with_variables_is_rewritten_too():
    """(A stateful int8 RNN returning sequences: its differences from LiteRT were the
    converter's wrapping QUANTIZE, :mod:`npu_sim.tosa.tflite.saturation`.)"""
    int8 = BODY.replace("xf32>", "xi8>")
    assert "tfl.slice" not in rewrite(int8)
    stateful = '  tosa.variable @"h" = dense<0> : tensor<1x3xi8>\n' + int8
    assert "tfl.slice" not in rewrite(stateful)
