"""Persistence: checkpointers that keep each thread's state between runs."""
