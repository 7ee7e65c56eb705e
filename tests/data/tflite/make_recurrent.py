"""Makes the recurrent .tflite models the legalization tests check against LiteRT.

Keras models exported the default way (``TFLiteConverter.from_keras_model``; int8 ones with
full-integer post-training quantization on a seeded random representative dataset):

* ``lstm_int8``: ``LSTM(16)`` over 8 steps of 10 features, ``Dense(4)``: TFLite fuses it
  into ``UNIDIRECTIONAL_SEQUENCE_LSTM`` (8x8_16 kernel);
* ``lstm_sequence_int8``: ``LSTM(16, return_sequences=True)``, flattened, ``Dense(4)``;
* ``lstm_batch2_int8``: ``lstm_int8`` with batch 2;
* ``lstm_stacked_int8``: ``LSTM(16, return_sequences=True)`` then ``LSTM(12)``;
* ``lstm_small_cell_int8``: the stacked model with its second layer's weights scaled down
  by 20, so that its cell state is calibrated below 2^-15, where LiteRT skips the tanh of
  the cell state (see :mod:`npu_sim.tosa.tflite.lstm`);
* ``lstm_bidirectional_int8``: ``Bidirectional(LSTM(8))`` (two fused LSTMs and a REVERSE_V2);
* ``gru_fp32``: ``GRU(12)`` (a WHILE loop whose body reads the input sequence from outside);
* ``gru_reset_before_fp32``: ``GRU(12, reset_after=False)``;
* ``lstm_stateful_fp32``: ``LSTM(16, stateful=True)`` (CALL_ONCE, resource variables, WHILE);
* ``lstm_hard_sigmoid_fp32``: ``LSTM(16, recurrent_activation="hard_sigmoid")`` (not fused);
* ``gru_int8``, ``gru_reset_before_int8``, ``lstm_stateful_loop_int8``: the GRUs and the
  stateful LSTM above, int8 (WHILE loops whose bodies TFLite's quantizer fills with int8
  operators between QUANTIZE and DEQUANTIZE of the loop-carried float values);
* ``lstm_stateful_sequence_int8``: ``LSTM(16, stateful=True, return_sequences=True)``,
  flattened, int8: its float state leaves the calibrated range over a stream, where LiteRT's
  QUANTIZE saturates (see :mod:`npu_sim.tosa.tflite.saturation`);
* ``gru_wide_int8``, ``gru_wide_reset_before_int8``, ``lstm_wide_hard_sigmoid_int8``:
  ``GRU(24)``, ``GRU(24, reset_after=False)`` (its recurrent product split in float) and
  ``LSTM(20, recurrent_activation="hard_sigmoid")`` over 20 steps of 13 features, int8 WHILE
  loops: where LiteRT's optimized kernels part from its reference kernels (see README.md);
* ``gru_sequence_fp32``, ``gru_sequence_int8``: ``GRU(12, return_sequences=True)``, flattened:
  the loop body writes each step's row into a buffer with two SLICEs at the loop counter
  (see :mod:`npu_sim.tosa.tflite.row_update`);
* ``gru_stacked_fp32``, ``gru_stacked_int8``: ``GRU(12, return_sequences=True)`` then ``GRU(8)``:
  two WHILE loops whose bodies reuse the same MLIR value names, the first writing rows.

Run with the examples' TensorFlow venv (tensorflow 2.21, tf-keras 2.21; see
examples/README.md) from this folder: ``python make_recurrent.py``. Not part of the test
suite.

TensorFlow 2.21's calibrator crashes on WHILE loops (a null tensor in its min/max logger),
so for the int8 WHILE models :func:`calibrate_by_running` stands in for it: it runs the float
model in TFLite's interpreter on the representative data, reads every float tensor of every
subgraph after each invocation (for a loop body, its last iteration), and writes those
ranges, widened by 15%, where the calibrator would. TensorFlow's own quantizer does the rest,
so the int8 models have the operators and parameters users get; only the ranges differ.
"""

import os

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

L = keras.layers
STEPS, FEATURES = 8, 10


#: kinds over a longer sequence of more features (steps, features): wider models, where kernel
#: differences that small ones never meet show
SHAPES = {"gru_wide": (20, 13), "gru_wide_reset_before": (20, 13), "lstm_wide_hard_sigmoid": (20, 13)}


def build(kind: str, batch: int = 1) -> keras.Model:
    inputs = keras.Input(SHAPES.get(kind, (STEPS, FEATURES)), batch_size=batch)
    layers = {
        "lstm": lambda: L.LSTM(16)(inputs),
        "lstm_sequence": lambda: L.Flatten()(L.LSTM(16, return_sequences=True)(inputs)),
        "lstm_stacked": lambda: L.LSTM(12)(L.LSTM(16, return_sequences=True)(inputs)),
        "lstm_bidirectional": lambda: L.Bidirectional(L.LSTM(8))(inputs),
        "gru": lambda: L.GRU(12)(inputs),
        "gru_reset_before": lambda: L.GRU(12, reset_after=False)(inputs),
        "gru_sequence": lambda: L.Flatten()(L.GRU(12, return_sequences=True)(inputs)),
        "gru_stacked": lambda: L.GRU(8)(L.GRU(12, return_sequences=True)(inputs)),
        "lstm_stateful": lambda: L.LSTM(16, stateful=True)(inputs),
        "lstm_stateful_sequence": lambda: L.Flatten()(L.LSTM(16, stateful=True, return_sequences=True)(inputs)),
        "lstm_hard_sigmoid": lambda: L.LSTM(16, recurrent_activation="hard_sigmoid")(inputs),
        "gru_wide": lambda: L.GRU(24)(inputs),
        "gru_wide_reset_before": lambda: L.GRU(24, reset_after=False)(inputs),
        "lstm_wide_hard_sigmoid": lambda: L.LSTM(20, recurrent_activation="hard_sigmoid")(inputs),
    }
    return keras.Model(inputs, L.Dense(4)(layers[kind]()))


def small_cell(model: keras.Model) -> keras.Model:
    """Scale the last LSTM's weights down: a cell state that stays tiny."""
    layer = [layer for layer in model.layers if isinstance(layer, L.LSTM)][-1]
    layer.set_weights([w / 20 for w in layer.get_weights()])
    return model


def calibrate_by_running(float_model: bytes, samples) -> bytes:
    """``float_model`` with min/max ranges on its float activations, as the calibrator writes them."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    interpreter = tf.lite.Interpreter(model_content=float_model, experimental_preserve_all_tensors=True)
    interpreter.allocate_tensors()
    model = flatbuffer_utils.read_model_from_bytearray(bytearray(float_model))
    ranges: dict[tuple[int, int], tuple[float, float]] = {}
    feeds = interpreter.get_input_details()
    for sample in samples():
        for feed, value in zip(feeds, sample):
            interpreter.set_tensor(feed["index"], np.asarray(value, dtype=feed["dtype"]))
        interpreter.invoke()
        for s, subgraph in enumerate(model.subgraphs):
            for t, tensor in enumerate(subgraph.tensors):
                if tensor.type != schema.TensorType.FLOAT32:
                    continue
                try:
                    value = interpreter.get_tensor(t, s)
                except ValueError:   # not allocated (a resource, an unused output)
                    continue
                if value is None or value.size == 0:
                    continue
                low, high = ranges.get((s, t), (np.inf, -np.inf))
                ranges[(s, t)] = (min(low, float(value.min())), max(high, float(value.max())))
    for s, subgraph in enumerate(model.subgraphs):
        for op in subgraph.operators:   # the parts of a split share its range (TFLite's int8 SPLIT needs that)
            code = model.operatorCodes[op.opcodeIndex]
            builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
            data = op.inputs[1 if builtin == schema.BuiltinOperator.SPLIT else 0] if op.inputs is not None else -1
            if builtin in (schema.BuiltinOperator.SPLIT, schema.BuiltinOperator.SPLIT_V) and (s, data) in ranges:
                for t in op.outputs:
                    ranges[(s, t)] = ranges[(s, data)]
        for t, tensor in enumerate(subgraph.tensors):
            constant = tensor.buffer and model.buffers[tensor.buffer].data is not None \
                and len(model.buffers[tensor.buffer].data)
            if tensor.type != schema.TensorType.FLOAT32 or constant or (s, t) not in ranges:
                continue
            low, high = ranges[(s, t)]
            margin = 0.15 * max(high - low, 1e-3)
            quantization = tensor.quantization or schema.QuantizationParametersT()
            quantization.min, quantization.max = [min(low - margin, 0.0)], [max(high + margin, 0.0)]
            tensor.quantization = quantization
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def convert(model: keras.Model, int8: bool, batch: int, stateful: bool, loop: bool = False,
            shape: tuple[int, int] = (STEPS, FEATURES)) -> bytes:
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if stateful:
        converter.experimental_enable_resource_variables = True
    if int8:
        rng = np.random.default_rng(0)

        def representative():
            for _ in range(32):
                yield [rng.normal(0, 1, size=(batch, *shape)).astype(np.float32)]

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
        if loop:
            from tensorflow.lite.python.optimize import calibrator

            calibrator.Calibrator.calibrate = lambda self, samples: calibrate_by_running(self._model_content, samples)
    return converter.convert()


MODELS = {   # file stem: (kind, int8, batch)   (WHILE loops: see LOOPS)
    "lstm_int8": ("lstm", True, 1),
    "lstm_sequence_int8": ("lstm_sequence", True, 1),
    "lstm_batch2_int8": ("lstm", True, 2),
    "lstm_stacked_int8": ("lstm_stacked", True, 1),
    "lstm_small_cell_int8": ("lstm_stacked", True, 1),
    "lstm_bidirectional_int8": ("lstm_bidirectional", True, 1),
    "gru_fp32": ("gru", False, 1),
    "gru_reset_before_fp32": ("gru_reset_before", False, 1),
    "lstm_stateful_fp32": ("lstm_stateful", False, 1),
    "lstm_hard_sigmoid_fp32": ("lstm_hard_sigmoid", False, 1),
    "gru_int8": ("gru", True, 1),
    "gru_reset_before_int8": ("gru_reset_before", True, 1),
    "lstm_stateful_loop_int8": ("lstm_stateful", True, 1),
    "gru_sequence_fp32": ("gru_sequence", False, 1),
    "gru_sequence_int8": ("gru_sequence", True, 1),
    "gru_stacked_fp32": ("gru_stacked", False, 1),
    "gru_stacked_int8": ("gru_stacked", True, 1),
    "lstm_stateful_sequence_int8": ("lstm_stateful_sequence", True, 1),
    "gru_wide_int8": ("gru_wide", True, 1),
    "gru_wide_reset_before_int8": ("gru_wide_reset_before", True, 1),
    "lstm_wide_hard_sigmoid_int8": ("lstm_wide_hard_sigmoid", True, 1),
}
#: seeds other than 1: with 7, TF's quantizer leaves the wide reset_after=False GRU's split of its
#: recurrent product in float (a dequantization, float SLICEs and quantizations around them)
SEEDS = {"gru_wide_reset_before_int8": 7}
#: int8 models whose layers TFLite writes as WHILE loops (calibrated by :func:`calibrate_by_running`)
LOOPS = {"gru_int8", "gru_reset_before_int8", "lstm_stateful_loop_int8", "lstm_stateful_sequence_int8",
         "gru_sequence_int8", "gru_stacked_int8", "gru_wide_int8",
         "gru_wide_reset_before_int8", "lstm_wide_hard_sigmoid_int8"}

if __name__ == "__main__":
    import sys

    for stem, (kind, int8, batch) in MODELS.items():
        if len(sys.argv) > 1 and stem not in sys.argv[1:]:   # only the models named
            continue
        seed = SEEDS.get(stem, 1)
        tf.random.set_seed(seed)
        np.random.seed(seed)
        keras.utils.set_random_seed(seed)
        model = build(kind, batch)
        if stem == "lstm_small_cell_int8":
            model = small_cell(model)
        shape = SHAPES.get(kind, (STEPS, FEATURES))
        data = convert(model, int8, batch, kind.startswith("lstm_stateful"), stem in LOOPS, shape)
        with open(f"{stem}.tflite", "wb") as out:
            out.write(data)
        print(stem, len(data), "bytes")
