"""What npu-sim itself reads from a ``.tflite`` model, beside Arm's converter.

Arm's ``tosa-converter-for-tflite`` turns a model into TOSA MLIR, but leaves TFLite's fused
recurrent operators (``UNIDIRECTIONAL_SEQUENCE_LSTM``) as ``tfl.`` operations, and its MLIR
drops the quantization of their operands. This stage fills the gap:

* :mod:`.flatbuffer` reads the model's tensors (shape, type, quantization, data) and
  operators (inputs, outputs, intermediates, options) straight from the flatbuffer;
* :mod:`.fixed_point` reproduces LiteRT's fixed-point helpers (its multiplier encoding and
  the int16 sigmoid/tanh of gemmlowp) bit for bit, as data: tables of every int16 input;
* :mod:`.lstm` writes the TOSA operators that compute a fused LSTM, step by step, with
  LiteRT's integer arithmetic, its state in TOSA variables.

Takes: the model bytes and, from :mod:`npu_sim.tosa.mlir_reader`, each foreign operation
with the TOSA values of its operands. Gives: TOSA operators in the block being read.
"""
