"""``specpath bench``: methods measured side by side on the user's model and prompts.

- :mod:`~specpath_engine.bench.workloads`: built-in workload kinds and ``.jsonl`` files;
- :mod:`~specpath_engine.bench.measure`: engines built once, rounds interleaved with the order
  rotated, one row per (workload, batch, temperature, method) against the same round's baseline;
- :mod:`~specpath_engine.bench.report`: tables, a markdown section, plots and an HTML report.
"""
