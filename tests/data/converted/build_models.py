#!/usr/bin/env python3
"""Build the converted test models from tf_keras (fixed seeds, random weights).

Run with the Python that has TensorFlow (see examples/generate_examples.py for the
versions): ``python build_models.py [NAME ...]``. Writes NAME.tflite, NAME.mlir and
NAME.tosa (or NAME.error.txt) in this folder, through the pipeline of
examples/generate_examples.py; ``$TOSA_CONVERTER`` and ``$TOSA_OPT`` (or the PATH)
locate tosa-converter-for-tflite and tosa-opt. Only some of the models are kept in
the repository (see README.md); the others stress larger or unsupported cases.
"""
from __future__ import annotations

import itertools
import os
import sys
import traceback
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_DETERMINISTIC_OPS", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))

import generate_examples as ge  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
SEED = 4321
CONVERTER = ge._find_tool("tosa-converter-for-tflite", None, "TOSA_CONVERTER")
TOSA_OPT = ge._find_tool("tosa-opt", None, "TOSA_OPT")


def to_tflite(model, shapes, mode: str, n_rep: int = 16) -> bytes:
    import tensorflow as tf

    rng = np.random.default_rng(SEED + 99)

    def rep():
        for _ in range(n_rep):
            yield [rng.integers(0, s[2], size=s[1]).astype(np.int32) if s[0] == "int"
                   else rng.normal(0, 1.0, size=s).astype(np.float32) for s in shapes]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if mode == "fp32":
        return conv.convert()
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    if mode == "int8":
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    elif mode == "int16x8":
        conv.target_spec.supported_ops = [
            tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        conv.inference_input_type = tf.int16
        conv.inference_output_type = tf.int16
    else:
        raise ValueError(mode)
    return conv.convert()


# ---------------------------------------------------------------- models
_INITIALIZERS = itertools.count(1)   # each initializer its own seed, in the order the models ask


def kinit(tf_keras):
    return tf_keras.initializers.GlorotUniform(seed=SEED + next(_INITIALIZERS))


def m_mnv2(tf_keras):
    m = tf_keras.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None,
                                          classes=10)
    inp = tf_keras.layers.Input(shape=(96, 96, 3), batch_size=1)
    return tf_keras.Model(inp, m(inp)), [(1, 96, 96, 3)]


def m_resnet(tf_keras):
    L = tf_keras.layers
    inp = L.Input(shape=(32, 32, 3), batch_size=1)
    x = L.Conv2D(16, 3, strides=2, padding="same", kernel_initializer=kinit(tf_keras))(inp)
    x = L.BatchNormalization()(x)
    x = L.ReLU()(x)
    x = L.MaxPooling2D(2, padding="same")(x)  # 8x8
    for i, ch in enumerate([16, 32, 64]):
        stride = 1 if i == 0 else 2
        sc = x
        y = L.Conv2D(ch, 3, strides=stride, padding="same", kernel_initializer=kinit(tf_keras))(x)
        y = L.BatchNormalization()(y)
        y = L.ReLU()(y)
        y = L.Conv2D(ch, 3, padding="same", kernel_initializer=kinit(tf_keras))(y)
        y = L.BatchNormalization()(y)
        if stride != 1 or sc.shape[-1] != ch:
            sc = L.Conv2D(ch, 1, strides=stride, padding="same",
                          kernel_initializer=kinit(tf_keras))(sc)
        x = L.Add()([y, sc])
        x = L.ReLU()(x)
    x = L.AveragePooling2D(2, padding="valid")(x)  # 2x2 -> 1x1
    x = L.Flatten()(x)
    x = L.Dense(10, kernel_initializer=kinit(tf_keras))(x)
    out = L.Softmax()(x)
    return tf_keras.Model(inp, out), [(1, 32, 32, 3)]


def m_attn(tf_keras):
    import tensorflow as tf
    L = tf_keras.layers
    S, D, H = 16, 32, 2
    inp = L.Input(shape=(S, D), batch_size=1)
    x = L.LayerNormalization()(inp)
    q = L.Dense(D, kernel_initializer=kinit(tf_keras))(x)
    k = L.Dense(D, kernel_initializer=kinit(tf_keras))(x)
    v = L.Dense(D, kernel_initializer=kinit(tf_keras))(x)

    def heads(t):
        t = L.Reshape((S, H, D // H))(t)
        return L.Permute((2, 1, 3))(t)  # (H, S, dh)

    qh, kh, vh = heads(q), heads(k), heads(v)
    scores = L.Lambda(lambda ab: tf.matmul(ab[0], ab[1], transpose_b=True) / np.sqrt(D // H))(
        [qh, kh])
    att = L.Softmax(axis=-1)(scores)
    ctx = L.Lambda(lambda ab: tf.matmul(ab[0], ab[1]))([att, vh])
    ctx = L.Permute((2, 1, 3))(ctx)
    ctx = L.Reshape((S, D))(ctx)
    o = L.Dense(D, kernel_initializer=kinit(tf_keras))(ctx)
    x = L.Add()([inp, o])
    y = L.LayerNormalization()(x)
    y = L.Dense(2 * D, activation="gelu", kernel_initializer=kinit(tf_keras))(y)
    y = L.Dense(D, kernel_initializer=kinit(tf_keras))(y)
    out = L.Add()([x, y])
    return tf_keras.Model(inp, out), [(1, S, D)]


def _seq(tf_keras, cell: str, unroll: bool):
    L = tf_keras.layers
    inp = L.Input(shape=(20, 8), batch_size=1)
    x = L.Conv1D(16, 3, padding="same", activation="relu", kernel_initializer=kinit(tf_keras))(inp)
    x = L.MaxPooling1D(2)(x)  # 10 steps
    rnn = {"gru": L.GRU, "lstm": L.LSTM}[cell]
    x = rnn(16, unroll=unroll, kernel_initializer=kinit(tf_keras),
            recurrent_initializer=tf_keras.initializers.Orthogonal(seed=SEED + 7))(x)
    out = L.Dense(4, kernel_initializer=kinit(tf_keras))(x)
    return tf_keras.Model(inp, out), [(1, 20, 8)]


def m_gru_unroll(tf_keras):
    return _seq(tf_keras, "gru", True)


def m_gru_loop(tf_keras):
    return _seq(tf_keras, "gru", False)


def m_lstm_unroll(tf_keras):
    return _seq(tf_keras, "lstm", True)


def m_lstm_loop(tf_keras):
    return _seq(tf_keras, "lstm", False)


def m_misc(tf_keras):
    """Encoder/decoder: pad, concat, transpose conv, upsampling (nearest + bilinear), mean,
    reshape/transpose, sigmoid / tanh / hard-swish, depthwise, mul, sub, leaky relu."""
    import tensorflow as tf
    L = tf_keras.layers
    inp = L.Input(shape=(24, 24, 4), batch_size=1)
    x = L.ZeroPadding2D(((1, 2), (2, 1)))(inp)  # 27x27
    x = L.Conv2D(8, 4, strides=2, padding="valid", kernel_initializer=kinit(tf_keras))(x)  # 12x12
    x = L.LeakyReLU(0.1)(x)
    e1 = x
    x = L.DepthwiseConv2D(3, strides=2, padding="same",
                          depthwise_initializer=kinit(tf_keras))(x)  # 6x6
    x = L.Activation("sigmoid")(x)
    up1 = L.UpSampling2D(2, interpolation="nearest")(x)  # 12x12
    up2 = L.UpSampling2D(2, interpolation="bilinear")(x)
    tc = L.Conv2DTranspose(8, 3, strides=2, padding="same", kernel_initializer=kinit(tf_keras))(x)
    x = L.Concatenate()([e1, up1, up2, tc])  # 12x12x32
    x = L.Conv2D(12, 1, activation="tanh", kernel_initializer=kinit(tf_keras))(x)
    m = L.Lambda(lambda t: tf.reduce_mean(t, axis=[1, 2], keepdims=True))(x)
    x = L.Multiply()([x, m])
    x = L.Lambda(lambda t: tf.image.resize(t, (18, 18), method="bilinear"))(x)
    x = L.Lambda(lambda t: t * tf.nn.relu6(t + 3.0) / 6.0)(x)  # hard swish
    x = L.Reshape((18 * 18, 12))(x)
    x = L.Permute((2, 1))(x)  # (12, 324)
    x = L.Lambda(lambda t: tf.reduce_max(t, axis=-1))(x)
    y = L.Dense(6, kernel_initializer=kinit(tf_keras))(x)
    z = L.Subtract()([y, L.Lambda(lambda t: tf.reduce_min(t, axis=-1, keepdims=True))(y)])
    return tf_keras.Model(inp, z), [(1, 24, 24, 4)]


def m_attn_noln(tf_keras):
    """m_attn without LayerNormalization (int16x8 LayerNorm does not legalize to TOSA)."""
    import tensorflow as tf
    L = tf_keras.layers
    S, D, H = 16, 32, 2
    inp = L.Input(shape=(S, D), batch_size=1)
    q = L.Dense(D, kernel_initializer=kinit(tf_keras))(inp)
    k = L.Dense(D, kernel_initializer=kinit(tf_keras))(inp)
    v = L.Dense(D, kernel_initializer=kinit(tf_keras))(inp)

    def heads(t):
        t = L.Reshape((S, H, D // H))(t)
        return L.Permute((2, 1, 3))(t)

    qh, kh, vh = heads(q), heads(k), heads(v)
    scores = L.Lambda(lambda ab: tf.matmul(ab[0], ab[1], transpose_b=True) / np.sqrt(D // H))(
        [qh, kh])
    att = L.Softmax(axis=-1)(scores)
    ctx = L.Lambda(lambda ab: tf.matmul(ab[0], ab[1]))([att, vh])
    ctx = L.Reshape((S, D))(L.Permute((2, 1, 3))(ctx))
    o = L.Dense(D, kernel_initializer=kinit(tf_keras))(ctx)
    x = L.Add()([inp, o])
    y = L.Dense(2 * D, activation="relu", kernel_initializer=kinit(tf_keras))(x)
    y = L.Dense(D, kernel_initializer=kinit(tf_keras))(y)
    return tf_keras.Model(inp, L.Add()([x, y])), [(1, S, D)]


def m_misc_nohs(tf_keras):
    """m_misc without hard-swish (TFLite has no 16x8 HARD_SWISH)."""
    import tensorflow as tf
    L = tf_keras.layers
    inp = L.Input(shape=(24, 24, 4), batch_size=1)
    x = L.ZeroPadding2D(((1, 2), (2, 1)))(inp)
    x = L.Conv2D(8, 4, strides=2, padding="valid", kernel_initializer=kinit(tf_keras))(x)
    x = L.LeakyReLU(0.1)(x)
    e1 = x
    x = L.DepthwiseConv2D(3, strides=2, padding="same",
                          depthwise_initializer=kinit(tf_keras))(x)
    x = L.Activation("sigmoid")(x)
    up1 = L.UpSampling2D(2, interpolation="nearest")(x)
    up2 = L.UpSampling2D(2, interpolation="bilinear")(x)
    tc = L.Conv2DTranspose(8, 3, strides=2, padding="same", kernel_initializer=kinit(tf_keras))(x)
    x = L.Concatenate()([e1, up1, up2, tc])
    x = L.Conv2D(12, 1, activation="tanh", kernel_initializer=kinit(tf_keras))(x)
    m = L.Lambda(lambda t: tf.reduce_mean(t, axis=[1, 2], keepdims=True))(x)
    x = L.Multiply()([x, m])
    x = L.Lambda(lambda t: tf.image.resize(t, (18, 18), method="bilinear"))(x)
    x = L.Reshape((18 * 18, 12))(x)
    x = L.Permute((2, 1))(x)
    x = L.Lambda(lambda t: tf.reduce_max(t, axis=-1))(x)
    y = L.Dense(6, kernel_initializer=kinit(tf_keras))(x)
    return tf_keras.Model(inp, y), [(1, 24, 24, 4)]


def m_mnv2_multi(tf_keras):
    """MobileNetV2 with logits (no softmax) plus two intermediate feature maps as extra outputs,
    so the bit-exact check sees large non-degenerate tensors."""
    base = tf_keras.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None,
                                             classes=10, classifier_activation=None,
                                             input_tensor=tf_keras.layers.Input(shape=(96, 96, 3),
                                                                               batch_size=1))
    outs = [base.get_layer("block_3_expand_relu").output,
            base.get_layer("block_13_project_BN").output, base.output]
    return tf_keras.Model(base.input, outs), [(1, 96, 96, 3)]


def m_resnet_multi(tf_keras):
    """m_resnet plus its post-pool feature map and the pre-softmax logits as outputs."""
    model, shapes = m_resnet(tf_keras)
    feats = [layer.output for layer in model.layers if isinstance(layer, tf_keras.layers.ReLU)]
    dense = [layer for layer in model.layers if isinstance(layer, tf_keras.layers.Dense)][0]
    return tf_keras.Model(model.input, [feats[1], feats[-1], dense.output, model.output]), shapes


def m_attn_1h(tf_keras, act="relu"):
    """Single-head attention on rank-3 tensors (no reshape/transpose around MATMUL), no LayerNorm."""
    import tensorflow as tf
    L = tf_keras.layers
    S, D = 16, 32
    inp = L.Input(shape=(S, D), batch_size=1)
    q = L.Dense(D, kernel_initializer=kinit(tf_keras))(inp)
    k = L.Dense(D, kernel_initializer=kinit(tf_keras))(inp)
    v = L.Dense(D, kernel_initializer=kinit(tf_keras))(inp)
    scores = L.Lambda(lambda ab: tf.matmul(ab[0], ab[1], transpose_b=True) / np.sqrt(D))([q, k])
    att = L.Softmax(axis=-1)(scores)
    ctx = L.Lambda(lambda ab: tf.matmul(ab[0], ab[1]))([att, v])
    x = L.Add()([inp, L.Dense(D, kernel_initializer=kinit(tf_keras))(ctx)])
    y = L.Dense(2 * D, activation=act, kernel_initializer=kinit(tf_keras))(x)
    y = L.Dense(D, kernel_initializer=kinit(tf_keras))(y)
    return tf_keras.Model(inp, [att, L.Add()([x, y])]), [(1, S, D)]


def m_attn_relu(tf_keras):
    """m_attn with ReLU instead of GELU in the MLP (fp32 GELU lowers to POW of negatives)."""
    import tensorflow as tf
    L = tf_keras.layers
    S, D, H = 16, 32, 2
    inp = L.Input(shape=(S, D), batch_size=1)
    x = L.LayerNormalization()(inp)
    q = L.Dense(D, kernel_initializer=kinit(tf_keras))(x)
    k = L.Dense(D, kernel_initializer=kinit(tf_keras))(x)
    v = L.Dense(D, kernel_initializer=kinit(tf_keras))(x)

    def heads(t):
        return L.Permute((2, 1, 3))(L.Reshape((S, H, D // H))(t))

    qh, kh, vh = heads(q), heads(k), heads(v)
    scores = L.Lambda(lambda ab: tf.matmul(ab[0], ab[1], transpose_b=True) / np.sqrt(D // H))(
        [qh, kh])
    att = L.Softmax(axis=-1)(scores)
    ctx = L.Lambda(lambda ab: tf.matmul(ab[0], ab[1]))([att, vh])
    ctx = L.Reshape((S, D))(L.Permute((2, 1, 3))(ctx))
    x = L.Add()([inp, L.Dense(D, kernel_initializer=kinit(tf_keras))(ctx)])
    y = L.LayerNormalization()(x)
    y = L.Dense(2 * D, activation="relu", kernel_initializer=kinit(tf_keras))(y)
    y = L.Dense(D, kernel_initializer=kinit(tf_keras))(y)
    return tf_keras.Model(inp, [att, L.Add()([x, y])]), [(1, S, D)]


def _recalibrate_bn(tf_keras, model, shape, batch=16):
    """Set every BatchNorm's moving statistics to the batch statistics of seeded random data
    (one forward pass with training=True, momentum 0), so that a randomly initialised deep
    network keeps non-vanishing activations (otherwise int8 logits are all equal)."""
    import tensorflow as tf
    bns = [m for m in model.submodules if isinstance(m, tf_keras.layers.BatchNormalization)]
    for bn in bns:
        bn.momentum = 0.0
    x = np.random.default_rng(SEED + 5).normal(0, 1, size=(batch,) + tuple(shape[1:]))
    model(tf.constant(x, tf.float32), training=True)
    return model


def m_mnv2_cal(tf_keras):
    """MobileNetV2 (softmax head) with BN statistics recalibrated + two feature-map outputs."""
    base = tf_keras.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None,
                                             classes=10)
    _recalibrate_bn(tf_keras, base, (1, 96, 96, 3))
    inp = tf_keras.layers.Input(shape=(96, 96, 3), batch_size=1)
    feats = tf_keras.Model(base.input, [base.get_layer("block_3_expand_relu").output,
                                        base.get_layer("block_13_project_BN").output,
                                        base.layers[-2].output, base.output])
    return tf_keras.Model(inp, feats(inp)), [(1, 96, 96, 3)]


def m_mnv2_224(tf_keras):
    """Full-size MobileNetV2 (alpha 1.0, 224x224), BN recalibrated, softmax head."""
    base = tf_keras.applications.MobileNetV2(input_shape=(224, 224, 3), alpha=1.0, weights=None,
                                             classes=1000)
    _recalibrate_bn(tf_keras, base, (1, 224, 224, 3), batch=4)
    inp = tf_keras.layers.Input(shape=(224, 224, 3), batch_size=1)
    return tf_keras.Model(inp, base(inp)), [(1, 224, 224, 3)]


def m_resnet50(tf_keras):
    """Keras ResNet50 (224x224, 1000 classes), BN recalibrated."""
    base = tf_keras.applications.ResNet50(input_shape=(224, 224, 3), weights=None, classes=1000)
    _recalibrate_bn(tf_keras, base, (1, 224, 224, 3), batch=4)
    inp = tf_keras.layers.Input(shape=(224, 224, 3), batch_size=1)
    return tf_keras.Model(inp, base(inp)), [(1, 224, 224, 3)]


def m_misc2b(tf_keras):
    """m_misc2 without GREATER/SELECT/ABS (int8 GREATER does not legalize, int8 ABS makes an invalid tosa.abs)."""
    return m_misc2(tf_keras, select=False)


def m_misc2(tf_keras, select=True):
    """More operators: pad + max-pool, space_to_depth / depth_to_space, strided slice, tile,
    abs, minimum, greater + where (select), split, conv3d, argmax output, batch-4D matmul."""
    import tensorflow as tf
    L = tf_keras.layers
    inp = L.Input(shape=(16, 16, 4), batch_size=1)
    x = L.Lambda(lambda t: tf.pad(t, [[0, 0], [1, 1], [2, 0], [0, 0]], constant_values=0.5))(inp)
    x = L.MaxPooling2D(3, strides=1)(x)  # 16x16? (18-3+1=16, 18-3+1=16)
    x = L.Conv2D(8, 3, padding="same", kernel_initializer=kinit(tf_keras))(x)
    s2d = L.Lambda(lambda t: tf.nn.space_to_depth(t, 2))(x)  # 8x8x32
    a, b = L.Lambda(lambda t: tf.split(t, 2, axis=-1))(s2d)
    if select:
        y = L.Lambda(lambda ab: tf.where(ab[0] > ab[1], tf.abs(ab[0]), tf.minimum(ab[0], ab[1])))([a, b])
    else:
        y = L.Lambda(lambda ab: tf.maximum(ab[0], ab[1]) - tf.minimum(ab[0], ab[1]))([a, b])
    y = L.Lambda(lambda t: t[:, 1::2, ::2, 2:14])(y)  # 4x4x12
    y = L.Lambda(lambda t: tf.tile(t, [1, 2, 2, 1]))(y)  # 8x8x12
    d2s = L.Lambda(lambda t: tf.nn.depth_to_space(t, 2))(
        L.Conv2D(16, 1, kernel_initializer=kinit(tf_keras))(y))  # 16x16x4
    v = L.Reshape((4, 16, 16, 1))(L.Permute((3, 1, 2))(d2s))  # (4,16,16,1) volume
    v = L.Conv3D(2, 3, strides=(1, 2, 2), padding="same", kernel_initializer=kinit(tf_keras))(v)
    v = L.Reshape((4, 8 * 8 * 2))(v)
    m = L.Lambda(lambda t: tf.matmul(t, t, transpose_b=True))(v)  # (4,4)
    am = L.Lambda(lambda t: tf.argmax(t, axis=-1, output_type=tf.int32))(m)
    return tf_keras.Model(inp, [m, am]), [(1, 16, 16, 4)]


def m_embed(tf_keras):
    """Token ids -> Embedding (GATHER) -> conv1d -> mean -> dense; int32 input."""
    L = tf_keras.layers
    inp = L.Input(shape=(12,), batch_size=1, dtype="int32")
    x = L.Embedding(50, 16, embeddings_initializer=tf_keras.initializers.RandomNormal(seed=SEED))(inp)
    x = L.Conv1D(16, 3, padding="same", activation="relu", kernel_initializer=kinit(tf_keras))(x)
    x = L.GlobalAveragePooling1D()(x)
    return tf_keras.Model(inp, L.Dense(5, kernel_initializer=kinit(tf_keras))(x)), [("int", (1, 12), 50)]


MODELS = {
    "mnv2_int8": (m_mnv2, "int8"),
    "resnet_int8": (m_resnet, "int8"),
    "resnet_fp32": (m_resnet, "fp32"),
    "resnet_int16x8": (m_resnet, "int16x8"),
    "attn_int8": (m_attn, "int8"),
    "attn_fp32": (m_attn, "fp32"),
    "attn_int16x8": (m_attn, "int16x8"),
    "gru_unroll_int8": (m_gru_unroll, "int8"),
    "gru_loop_int8": (m_gru_loop, "int8"),
    "lstm_unroll_int8": (m_lstm_unroll, "int8"),
    "lstm_loop_int8": (m_lstm_loop, "int8"),
    "gru_unroll_fp32": (m_gru_unroll, "fp32"),
    "misc_int8": (m_misc, "int8"),
    "misc_fp32": (m_misc, "fp32"),
    "misc_int16x8": (m_misc, "int16x8"),
    "gru_loop_fp32": (m_gru_loop, "fp32"),
    "mnv2_multi_int8": (m_mnv2_multi, "int8"),
    "misc2_int8": (m_misc2, "int8"),
    "misc2b_int8": (m_misc2b, "int8"),
    "misc2_fp32": (m_misc2, "fp32"),
    "misc2_int16x8": (m_misc2, "int16x8"),
    "embed_int8": (m_embed, "int8"),
    "embed_fp32": (m_embed, "fp32"),
    "mnv2_224_int8": (m_mnv2_224, "int8"),
    "resnet50_int8": (m_resnet50, "int8"),
    "mnv2_cal_int8": (m_mnv2_cal, "int8"),
    "mnv2_cal_fp32": (m_mnv2_cal, "fp32"),
    "mnv2_cal_int16x8": (m_mnv2_cal, "int16x8"),
    "mnv2_multi_fp32": (m_mnv2_multi, "fp32"),
    "resnet_multi_int8": (m_resnet_multi, "int8"),
    "resnet_multi_int16x8": (m_resnet_multi, "int16x8"),
    "resnet_multi_fp32": (m_resnet_multi, "fp32"),
    "attn1h_int8": (m_attn_1h, "int8"),
    "attn1h_int16x8": (m_attn_1h, "int16x8"),
    "attn1h_fp32": (m_attn_1h, "fp32"),
    "attn_relu_fp32": (m_attn_relu, "fp32"),
    "attn_relu_int8": (m_attn_relu, "int8"),
    "attn_noln_int16x8": (m_attn_noln, "int16x8"),
    "misc_nohs_int16x8": (m_misc_nohs, "int16x8"),
}


def build(name: str) -> None:
    import tf_keras

    fn, mode = MODELS[name]
    err = HERE / f"{name}.error.txt"
    if err.exists():
        err.unlink()
    ge._seed_everything(SEED)
    try:
        model, shapes = fn(tf_keras)
        tfl = to_tflite(model, shapes, mode, n_rep=8 if name in ("mnv2_224_int8", "resnet50_int8") else 16)
        (HERE / f"{name}.tflite").write_bytes(tfl)
        path, mlir = ge._tflite_to_tosa(tfl, HERE, name, CONVERTER, TOSA_OPT)
        print(f"OK {name}: {path.stat().st_size} B, ops: {', '.join(ge._tosa_ops_in_mlir(mlir))}",
              flush=True)
    except BaseException as exc:  # SystemExit from ge._run too
        err.write_text(traceback.format_exc())
        print(f"FAIL {name}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)


if __name__ == "__main__":
    for n in (sys.argv[1:] or list(MODELS)):
        build(n)
