"""Passes: fusion, lowering, folding, unit choice, staging, ordering; per block tiling, residency, cascading.
Takes: a validated TOSA Graph and the HwConfig.
Gives: a LoweredGraph in execution order; per block, the values resident in TCM and a TilePlan per operation.
"""
