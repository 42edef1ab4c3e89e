"""Code the benchmarks share: the trace-driven simulators, the held-out prompts, the model pair and small helpers."""
