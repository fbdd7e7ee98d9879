"""Deterministic simulation of KRaft quorums under faults, with invariant checks after every event."""
