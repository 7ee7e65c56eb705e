module attributes {tosa.description = "TOSA FBS Converted", tosa.fbs_version = "1.1.0d"} {
  tosa.variable @counter = dense<0> : tensor<1x4xi32>
  func.func @main(%arg0: tensor<1x4xi32> {tosa.tensor_name = "increment"}) -> (tensor<1x4xi32> {tosa.tensor_name = "state_next"}) {
    %0 = tosa.variable_read @counter : tensor<1x4xi32>
    %1 = tosa.add %0, %arg0 : (tensor<1x4xi32>, tensor<1x4xi32>) -> tensor<1x4xi32>
    tosa.variable_write @counter, %1 : tensor<1x4xi32>
    return %1 : tensor<1x4xi32>
  }
}

