"""The host: CPU operators, what the host did while the GPU waited, synchronizations, the input pipeline, op
nesting, launch links and the launch queue."""
