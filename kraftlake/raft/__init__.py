"""KRaft consensus as a deterministic step machine: messages and ticks in; messages, entries and commits out.

`RaftNode` (node.py) is driven by a service or the simulation; `QuorumState` (quorum_state.py) alone makes
state transitions; entries are opaque bytes (the raft layer never imports `kraftlake.records`).
"""
