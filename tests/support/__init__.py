"""Test support: a random-program generator for gpuc's Python subset and its typed reference evaluator."""
