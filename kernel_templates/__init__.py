"""Kernel templates: one module per kernel family (reference, Triton kernel, launcher, inputs, costs).

Importing any family registers the public functions as PyTorch custom ops
(``torch.ops.tuner.<function>``, ``kernel_templates.ops``).
"""
from kernel_templates import ops  # noqa: F401  (registers torch.ops.tuner.*)
