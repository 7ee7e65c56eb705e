module attributes {tosa.description = "TOSA FBS Converted", tosa.fbs_version = "1.1.0d"} {
  func.func @main(%arg0: tensor<4xi32> {tosa.tensor_name = "x"}, %arg1: tensor<i32> {tosa.tensor_name = "n"}) -> (tensor<4xi32> {tosa.tensor_name = "acc_final"}, tensor<i32> {tosa.tensor_name = "i_final"}) {
    %0 = "tosa.const"() <{values = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %1 = "tosa.const"() <{values = dense<0> : tensor<4xi32>}> : () -> tensor<4xi32>
    %2:4 = tosa.while_loop (%arg2 = %0, %arg3 = %arg1, %arg4 = %arg0, %arg5 = %1) : (tensor<i32>, tensor<i32>, tensor<4xi32>, tensor<4xi32>) -> (tensor<i32>, tensor<i32>, tensor<4xi32>, tensor<4xi32>) {
      %3 = tosa.greater %arg3, %arg2 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      tosa.yield %3 : tensor<i1>
    } do {
    ^bb0(%arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<4xi32>, %arg5: tensor<4xi32>):
      %3 = "tosa.const"() <{values = dense<1> : tensor<i32>}> : () -> tensor<i32>
      %4 = tosa.add %arg2, %3 : (tensor<i32>, tensor<i32>) -> tensor<i32>
      %5 = tosa.add %arg5, %arg4 : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
      tosa.yield %4, %arg3, %arg4, %5 : tensor<i32>, tensor<i32>, tensor<4xi32>, tensor<4xi32>
    }
    return %2#3, %2#0 : tensor<4xi32>, tensor<i32>
  }
}

