module attributes {tosa.description = "TOSA FBS Converted", tosa.fbs_version = "1.1.0d"} {
  func.func @main(%arg0: tensor<1x4x4x8xf32> {tosa.tensor_name = "a"}, %arg1: tensor<1x1x1x8xf32> {tosa.tensor_name = "b"}) -> (tensor<1x4x4x8xf32> {tosa.tensor_name = "output"}) {
    %0 = "tosa.const"() <{values = dense<[[[[5.000000e-01]], [[-1.000000e+00]], [[2.000000e+00]], [[2.500000e-01]]]]> : tensor<1x4x1x1xf32>}> : () -> tensor<1x4x1x1xf32>
    %1 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
    %2 = "tosa.const"() <{values = dense<0.000000e+00> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
    %3 = tosa.add %arg0, %arg1 : (tensor<1x4x4x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x4x4x8xf32>
    %4 = tosa.mul %3, %0, %1 : (tensor<1x4x4x8xf32>, tensor<1x4x1x1xf32>, tensor<1xi8>) -> tensor<1x4x4x8xf32>
    %5 = tosa.maximum %4, %2 : (tensor<1x4x4x8xf32>, tensor<1x1x1x1xf32>) -> tensor<1x4x4x8xf32>
    return %5 : tensor<1x4x4x8xf32>
  }
}

