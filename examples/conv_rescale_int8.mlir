module attributes {tosa.description = "TOSA FBS Converted", tosa.fbs_version = "1.1.0d"} {
  func.func @main(%arg0: tensor<1x8x8x3xi8> {tosa.tensor_name = "input"}) -> (tensor<1x8x8x4xi8> {tosa.tensor_name = "output"}) {
    %0 = "tosa.const"() <{values = dense<"0xAA4AA715CFEA967283A56DF7AF19FB0A0E4A3E3B26DD2EA6D73FF4792674894A018D46B132192583A135F2DB428B37A88BBE8386330026203899BFA8606C1C2C3CACFFC01681CF5977E83CBD862CB265A576C1CC45C0B90939F1EBD837620A97224ACAC532CC5B3006291893"> : tensor<4x3x3x3xi8>}> : () -> tensor<4x3x3x3xi8>
    %1 = "tosa.const"() <{values = dense<[2498, -1455, 1812, -2255]> : tensor<4xi32>}> : () -> tensor<4xi32>
    %2 = "tosa.const"() <{values = dense<-7> : tensor<1xi8>}> : () -> tensor<1xi8>
    %3 = "tosa.const"() <{values = dense<3> : tensor<1xi8>}> : () -> tensor<1xi8>
    %4 = tosa.conv2d %arg0, %0, %1, %2, %3 {acc_type = i32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x8x8x3xi8>, tensor<4x3x3x3xi8>, tensor<4xi32>, tensor<1xi8>, tensor<1xi8>) -> tensor<1x8x8x4xi32>
    %5 = "tosa.const"() <{values = dense<[1126999418, 1566804070, 1896657558, 1140743314]> : tensor<4xi32>}> : () -> tensor<4xi32>
    %6 = "tosa.const"() <{values = dense<[38, 38, 38, 37]> : tensor<4xi8>}> : () -> tensor<4xi8>
    %7 = "tosa.const"() <{values = dense<0> : tensor<1xi32>}> : () -> tensor<1xi32>
    %8 = "tosa.const"() <{values = dense<5> : tensor<1xi8>}> : () -> tensor<1xi8>
    %9 = tosa.rescale %4, %5, %6, %7, %8 {input_unsigned = false, output_unsigned = false, per_channel = true, rounding_mode = DOUBLE_ROUND, scale32 = true} : (tensor<1x8x8x4xi32>, tensor<4xi32>, tensor<4xi8>, tensor<1xi32>, tensor<1xi8>) -> tensor<1x8x8x4xi8>
    %10 = tosa.clamp %9 {max_val = 127 : i8, min_val = 5 : i8} : (tensor<1x8x8x4xi8>) -> tensor<1x8x8x4xi8>
    return %10 : tensor<1x8x8x4xi8>
  }
}

