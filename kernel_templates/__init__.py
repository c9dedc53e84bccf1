"""Kernel templates: one module per kernel family (reference, Triton kernel, launcher, inputs, costs)."""
