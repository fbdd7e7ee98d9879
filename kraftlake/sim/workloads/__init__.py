"""Synthetic metadata logs written as Kafka writes them: workloads for tests and benchmarks.

One module per workload: ``churn`` (a cluster of brokers and partitions with leader and ISR churn, topic
deletion and re-creation, at benchmark sizes) and ``entities`` (every entity kind the history tables hold,
transactions included, at test sizes).
"""
