"""Whole test graphs built with tosa-tools' own serializer (the oracle side).

Our executor reads the very same bytes with our reader, so the reference
model and npu-sim run one graph. Builders return ``bytes`` of a .tosa file.
"""

from __future__ import annotations

import numpy as np
import tosa_serializer as ts

OP = ts.Op
I8, I32, BOOL, FP32 = ts.DType.INT8, ts.DType.INT32, ts.DType.BOOL, ts.DType.FP32


class Builder:
    """A thin layer over ``TosaSerializer`` with named tensors and multiple regions."""

    def __init__(self) -> None:
        self.ser = ts.TosaSerializer("", ts.ConstMode.EMBED)

    @property
    def block(self):
        return self.ser.currRegion.currBasicBlock

    def region(self, name: str) -> None:
        """Start a new region holding one block of the same name (tosa-tools' layout)."""
        self.ser.startRegion(name)
        self.ser.addBasicBlock(name)

    def input(self, name: str, shape: list[int], dtype) -> str:
        self.block.addTensor(name, shape, dtype)
        self.block.addInput(name)
        return name

    def tensor(self, name: str, shape: list[int], dtype) -> str:
        self.block.addTensor(name, shape, dtype)
        return name

    def const(self, name: str, value: np.ndarray, dtype) -> str:
        self.ser.addConst(list(value.shape), dtype, value, name)
        return name

    def variable(self, name: str, symbol: str, value: np.ndarray | None, shape, dtype) -> str:
        self.block.addTensor(name, list(shape), dtype, value, "", False, True, symbol)
        return name

    def output(self, name: str) -> str:
        self.block.addOutput(name)
        return name

    def op(self, op, inputs: list[str], outputs: list[str], attribute) -> None:
        self.block.addOperator(op, inputs, outputs, attribute)

    def identity(self, src: str, dst: str) -> None:
        self.op(OP.IDENTITY, [src], [dst], _attr("IdentityAttribute"))

    def var_read(self, variable: str, dst: str) -> None:
        """A variable read as tosa-opt writes it: IDENTITY with a VariableReadAttribute."""
        self.op(OP.IDENTITY, [variable], [dst], _attr("VariableReadAttribute"))

    def var_write(self, src: str, variable: str) -> None:
        self.op(OP.IDENTITY, [src], [variable], _attr("VariableWriteAttribute"))

    def serialize(self) -> bytes:
        return bytes(self.ser.serialize())


def _attr(method: str, *args):
    attribute = ts.TosaSerializerAttribute()
    getattr(attribute, method)(*args)
    return attribute


def accumulator_graph() -> bytes:
    """Two variables: ``acc`` (int32 [2,3]) += x each invocation, and ``last``
    (int8 [4]) holding the previous invocation's ``y``.

    Outputs: ``acc_before`` (acc as read at the start), ``sum`` (acc + x) and
    ``last_y`` (the previous y).
    """
    b = Builder()
    x = b.input("x", [2, 3], I32)
    y = b.input("y", [4], I8)
    acc = b.variable("acc_var", "acc", np.arange(6, dtype=np.int32).reshape(2, 3), [2, 3], I32)
    last = b.variable("last_var", "last", np.array([1, -2, 3, -4], np.int8), [4], I8)
    acc_before = b.tensor("acc_before", [2, 3], I32)
    total = b.tensor("sum", [2, 3], I32)
    last_y = b.tensor("last_y", [4], I8)
    b.var_read(acc, acc_before)
    b.op(OP.ADD, [acc_before, x], [total], _attr("AddAttribute"))
    b.var_write(total, acc)
    b.var_read(last, last_y)
    b.var_write(y, last)
    for name in (acc_before, total, last_y):
        b.output(name)
    return b.serialize()


def cond_if_graph() -> bytes:
    """``out = cond ? a + b : a - b`` (int32 [2,3]) via COND_IF with regions THEN/ELSE."""
    b = Builder()
    cond = b.input("cond", [1], BOOL)
    a = b.input("a", [2, 3], I32)
    c = b.input("b", [2, 3], I32)
    out = b.tensor("out", [2, 3], I32)
    b.op(OP.COND_IF, [cond, a, c], [out], _attr("CondIfAttribute", "THEN", "ELSE"))
    b.output(out)
    for region, op, method in (("THEN", OP.ADD, "AddAttribute"), ("ELSE", OP.SUB, "SubAttribute")):
        b.region(region)
        x = b.input("x", [2, 3], I32)
        y = b.input("y", [2, 3], I32)
        r = b.tensor("r", [2, 3], I32)
        b.op(op, [x, y], [r], _attr(method))
        b.output(r)
    return b.serialize()


def while_loop_graph(limit: int | None = None) -> bytes:
    """Doubles ``acc`` (int32 [3]) while ``i < n``, counting ``i`` up by one.

    Inputs ``i`` (int32 [1]), ``n`` (int32 [1]), ``acc``; outputs the final
    three. ``limit`` is unused by the graph (kept for the test's readability).
    """
    b = Builder()
    i = b.input("i", [1], I32)
    n = b.input("n", [1], I32)
    acc = b.input("acc", [3], I32)
    outs = [b.tensor(f"{t}_out", s, I32) for t, s in (("i", [1]), ("n", [1]), ("acc", [3]))]
    b.op(OP.WHILE_LOOP, [i, n, acc], outs, _attr("WhileLoopAttribute", "COND", "BODY"))
    for name in outs:
        b.output(name)

    b.region("COND")
    ci, cn, _ = b.input("i", [1], I32), b.input("n", [1], I32), b.input("acc", [3], I32)
    keep_going = b.tensor("keep_going", [1], BOOL)
    b.op(OP.GREATER, [cn, ci], [keep_going], _attr("GreaterAttribute"))
    b.output(keep_going)

    b.region("BODY")
    bi, bn, bacc = b.input("i", [1], I32), b.input("n", [1], I32), b.input("acc", [3], I32)
    one = b.const("one", np.array([1], np.int32), I32)
    i_next = b.tensor("i_next", [1], I32)
    acc_next = b.tensor("acc_next", [3], I32)
    n_next = b.tensor("n_next", [1], I32)
    b.op(OP.ADD, [bi, one], [i_next], _attr("AddAttribute"))
    b.op(OP.ADD, [bacc, bacc], [acc_next], _attr("AddAttribute"))
    b.identity(bn, n_next)
    for name in (i_next, n_next, acc_next):
        b.output(name)
    return b.serialize()
