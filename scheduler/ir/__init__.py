"""The lowered IR, the vocabulary every stage shares: what describes an NPU operation.
Takes: TOSA operators (support checks each one and names the compute unit that runs it).
Gives: Value, Step, NpuOp, LoweredBlock and LoweredGraph (npu_ops).
"""
