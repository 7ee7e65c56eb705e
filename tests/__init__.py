"""npu-sim's test suite (a regular package: tosa-tools and tosa-converter-for-tflite install a top-level
``tests`` package of their own, which would otherwise shadow this one)."""
