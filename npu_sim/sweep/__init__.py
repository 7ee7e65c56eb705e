"""Design-space sweeps: a spec of HwConfig axes, points run in parallel (local processes or a
dask cluster), each cached by a hash of what decides its figures, and results.csv with the
Pareto front of cycles, energy and area. See :mod:`npu_sim.commands.sweep_cmd` for the CLI."""
