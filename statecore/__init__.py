"""statecore: Flink's heap state backend in Python (stdlib only).

Key groups identical to Flink's, the copy-on-write state map with incremental rehash and
versioned snapshots, and the tables built from them.
"""
