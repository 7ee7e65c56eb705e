"""Memory planning: symbolic buffers and views, byte ranges, live ranges, planners, fixed placements,
block tensors.
Takes: buffers with their live ranges (in command ids) and the lowered graph's values.
Gives: an offset for every buffer in each memory (or, for a block tensor, its blocks' offsets), the
byte ranges each view touches, the constant pool.
"""
