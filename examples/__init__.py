"""Examples of a model runtime using the kernels (``decode_step.py``: one decode step)."""
