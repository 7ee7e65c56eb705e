module attributes {tosa.description = "TOSA FBS Converted", tosa.fbs_version = "1.1.0d"} {
  func.func @main(%arg0: tensor<i32> {tosa.tensor_name = "selector"}, %arg1: tensor<2x3xi32> {tosa.tensor_name = "a"}, %arg2: tensor<2x3xi32> {tosa.tensor_name = "b"}) -> (tensor<2x3xi32> {tosa.tensor_name = "output"}) {
    %0 = "tosa.const"() <{values = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %1 = tosa.greater %arg0, %0 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %2 = tosa.cond_if %1 (%arg3 = %arg1, %arg4 = %arg2) : tensor<i1> (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32> {
    ^bb0(%arg3: tensor<2x3xi32>, %arg4: tensor<2x3xi32>):
      %3 = tosa.add %arg3, %arg4 : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
      tosa.yield %3 : tensor<2x3xi32>
    } else {
    ^bb0(%arg3: tensor<2x3xi32>, %arg4: tensor<2x3xi32>):
      %3 = tosa.sub %arg3, %arg4 : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
      tosa.yield %3 : tensor<2x3xi32>
    }
    return %2 : tensor<2x3xi32>
  }
}

