"""Memory planning: symbolic buffers and views, byte ranges, live ranges, planners, fixed placements.
Takes: buffers with their live ranges (in command ids) and the lowered graph's values.
Gives: an offset for every buffer in each memory, the byte ranges each view touches, the constant pool.
"""
