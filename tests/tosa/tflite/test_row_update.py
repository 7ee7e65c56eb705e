"""The row update of a loop's sequence buffer (two dynamic ``tfl.slice`` around the new row)
written as an EQUAL and a SELECT, with names scoped as MLIR scopes them (sibling loop bodies
reuse them); a slice at a loop counter that is no such update is refused saying why, and
other uses of ``tfl.slice`` stay as they are."""

import pytest

from npu_sim.errors import UnsupportedFeatureError
from npu_sim.tosa.tflite.row_update import rewrite

#: the function's constants, then one loop whose body writes row %arg2 of its buffer %arg3
CONSTANTS = """  func.func @main(%arg0: tensor<1x4x3xf32>) -> tensor<4x1x3xf32> {
    %4 = tosa.const_shape  {values = dense<1> : tensor<1xindex>} : () -> !tosa.shape<1>
    %18 = "tosa.const"() <{values = dense<1> : tensor<i32>}> : () -> tensor<i32>
    %19 = "tosa.const"() <{values = dense<-1> : tensor<2xi32>}> : () -> tensor<2xi32>
    %20 = "tosa.const"() <{values = dense<0> : tensor<3xi32>}> : () -> tensor<3xi32>
    %21 = "tosa.const"() <{values = dense<0> : tensor<2xi32>}> : () -> tensor<2xi32>
    %22 = "tosa.const"() <{values = dense<-1> : tensor<3xi32>}> : () -> tensor<3xi32>
    %26 = "tosa.const"() <{values = dense<0.000000e+00> : tensor<4x1x3xf32>}> : () -> tensor<4x1x3xf32>
"""
LOOP = """    %28:3 = tosa.while_loop (%arg1 = %27, %arg2 = %27, %arg3 = %26) : (tensor<i32>, tensor<i32>, """ \
    """tensor<4x1x3xf32>) -> (tensor<i32>, tensor<i32>, tensor<4x1x3xf32>) {
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<4x1x3xf32>):
      %31 = tosa.greater %23, %arg2 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      tosa.yield %31 : tensor<i1>
    } do {
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<4x1x3xf32>):
      %31 = tosa.add %arg2, %18 : (tensor<i32>, tensor<i32>) -> tensor<i32>
      %57 = tosa.reshape %arg2, %4 : (tensor<i32>, !tosa.shape<1>) -> tensor<1xi32>
      %58 = tosa.concat %57, %19 {axis = 0 : i32} : (tensor<1xi32>, tensor<2xi32>) -> tensor<3xi32>
      %59 = "tfl.slice"(%arg3, %20, %58) : (tensor<4x1x3xf32>, tensor<3xi32>, tensor<3xi32>) -> tensor<?x?x?xf32>
      %60 = tosa.reshape %31, %4 : (tensor<i32>, !tosa.shape<1>) -> tensor<1xi32>
      %61 = tosa.concat %60, %21 {axis = 0 : i32} : (tensor<1xi32>, tensor<2xi32>) -> tensor<3xi32>
      %62 = "tfl.slice"(%arg3, %61, %22) : (tensor<4x1x3xf32>, tensor<3xi32>, tensor<3xi32>) -> tensor<?x1x3xf32>
      %64 = tosa.concat %59, %63, %62 {axis = 0 : i32} : """ \
    """(tensor<?x?x?xf32>, tensor<1x1x3xf32>, tensor<?x1x3xf32>) -> tensor<4x1x3xf32>
      tosa.yield %31, %31, %64 : tensor<i32>, tensor<i32>, tensor<4x1x3xf32>
    }
"""
#: a second loop after the first, reusing its names: here %59 is the counter's next value
SIBLING = """    %29:2 = tosa.while_loop (%arg1 = %27, %arg2 = %28#2) : (tensor<i32>, tensor<4x1x3xf32>) """ \
    """-> (tensor<i32>, tensor<4x1x3xf32>) {
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<4x1x3xf32>):
      %31 = tosa.greater %23, %arg1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      tosa.yield %31 : tensor<i1>
    } do {
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<4x1x3xf32>):
      %59 = tosa.add %arg1, %18 : (tensor<i32>, tensor<i32>) -> tensor<i32>
      %62 = tosa.add %59, %18 : (tensor<i32>, tensor<i32>) -> tensor<i32>
      tosa.yield %62, %arg2 : tensor<i32>, tensor<4x1x3xf32>
    }
"""
END = """    return %28#2 : tensor<4x1x3xf32>
  }"""
BODY = CONSTANTS + LOOP + END


def test_the_row_update_becomes_a_select_of_the_row_at_the_counter():
    out = rewrite(BODY)
    assert "tfl.slice" not in out
    assert "dense<[0, 1, 2, 3]> : tensor<4xi32>" in out
    assert "%row_update_64_index = tosa.reshape %57," in out
    assert "%64 = tosa.select %row_update_64_mask, %63, %arg3 : (tensor<4x1x1xi1>, tensor<1x1x3xf32>, " \
           "tensor<4x1x3xf32>) -> tensor<4x1x3xf32>" in out


def test_names_a_sibling_loop_reuses_do_not_count_as_readers():
    """(Stacked GRUs returning sequences: the second loop's body also defines %59 and %62.)"""
    out = rewrite(CONSTANTS + LOOP + SIBLING + END)
    assert "tfl.slice" not in out
    assert "%64 = tosa.select" in out
    assert "%59 = tosa.add %arg1, %18" in out and "tosa.yield %62, %arg2" in out


def test_two_sibling_loops_both_writing_rows_are_both_rewritten():
    second = LOOP.replace("%28:3", "%29:3").replace("%arg3 = %26", "%arg3 = %28#2")
    out = rewrite(CONSTANTS + LOOP + second + END)
    assert "tfl.slice" not in out
    assert out.count("%64 = tosa.select %row_update_64_mask, %63, %arg3") == 2


def test_a_slice_from_another_start_is_refused_saying_what_did_not_match():
    moved = BODY.replace('"tfl.slice"(%arg3, %20, %58)', '"tfl.slice"(%arg3, %22, %58)')
    with pytest.raises(UnsupportedFeatureError, match=r"^model\.tflite: operator SLICE \(tfl\.slice\) %59 at a loop "
                       r"counter: npu-sim rewrites .* cannot match this one: its slices are not rows 0 \.\. i-1"):
        rewrite(moved, "model.tflite")
    off_by_two = BODY.replace("%60 = tosa.reshape %31,", "%60 = tosa.reshape %arg1,")
    with pytest.raises(UnsupportedFeatureError, match="not rows 0 .. i-1 and i.1"):
        rewrite(off_by_two)


def test_a_slice_read_elsewhere_too_is_refused():
    read_twice = BODY.replace("      tosa.yield %31, %31, %64",
                              "      %65 = tosa.add %59, %59 : (tensor<?x?x?xf32>, tensor<?x?x?xf32>) -> "
                              "tensor<?x?x?xf32>\n      tosa.yield %31, %31, %64")
    with pytest.raises(UnsupportedFeatureError, match=r"other readers \(1 and 0\)"):
        rewrite(read_twice)


def test_a_counter_slice_without_its_row_is_refused():
    alone = BODY.replace("%64 = tosa.concat %59, %63, %62", "%64 = tosa.concat %63, %63, %63")
    with pytest.raises(UnsupportedFeatureError, match="no concatenation puts a new row between it"):
        rewrite(alone)


def test_a_zero_from_a_sibling_region_is_not_the_visible_one():
    """The head's begin %20 must be the zero the loop sees: a sibling defining %20 = 0 does not
    make the function's %20 (here -1) a zero."""
    shadowed = CONSTANTS.replace("dense<0> : tensor<3xi32>", "dense<-1> : tensor<3xi32>")
    sibling = SIBLING.replace("      %59 = tosa.add", '      %20 = "tosa.const"() <{values = dense<0> : '
                              'tensor<3xi32>}> : () -> tensor<3xi32>\n      %59 = tosa.add')
    with pytest.raises(UnsupportedFeatureError, match="not rows 0 .. i-1"):
        rewrite(shadowed + sibling + LOOP + END)


def test_a_slice_at_constant_bounds_stays_for_the_reader():
    constant = '    %5 = "tfl.slice"(%arg0, %20, %22) : (tensor<1x4x3xf32>, tensor<3xi32>, tensor<3xi32>) -> ' \
               'tensor<?x?x?xf32>\n'
    text = CONSTANTS + constant + END
    assert rewrite(text) == text


def test_an_integer_buffer_in_a_graph_with_variables_is_rewritten_too():
    """(A stateful int8 RNN returning sequences: its differences from LiteRT were the
    converter's wrapping QUANTIZE, :mod:`npu_sim.tosa.tflite.saturation`.)"""
    int8 = BODY.replace("x3xf32>", "x3xi8>")
    assert "tfl.slice" not in rewrite(int8)
    stateful = '  tosa.variable @"h" = dense<0> : tensor<1x3xi8>\n' + int8
    assert "tfl.slice" not in rewrite(stateful)
