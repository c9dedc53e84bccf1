"""tuner: autotuning and kernel search for the kernels DeepSeek-V4-class serving needs.

This package root imports nothing: ``tuner.runtime`` must stay free of tuning
dependencies, and ``tuner.spec`` is imported by kernel templates.
"""
__version__ = "0.1.0"
