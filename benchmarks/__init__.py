"""Benchmarks of the suite: `python -m benchmarks` runs them all, `python -m benchmarks NAME` one.

Each module in this package (a file not starting with "_") is one benchmark and defines
``main(argv: list[str]) -> int``, which prints its own table. Adding a benchmark is adding a file.
"""
