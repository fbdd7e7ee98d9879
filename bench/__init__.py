"""`make bench`: each ``bench.bench_<name>`` module exposes ``run(ctx) -> dict`` with its figures.

Figures are medians over repeated runs; every figure that has a baseline (Kafka's own tool, or a naive
implementation) reports the ratio measured in the same run.
"""
