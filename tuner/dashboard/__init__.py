"""Regression tracking: history per (kernel, workload, GPU, software), step detection, HTML report and server."""
from tuner.dashboard.detect import Change, detect, detect_series, regressions
from tuner.dashboard.history import Point, Series, load_history

__all__ = ["Change", "Point", "Series", "detect", "detect_series", "load_history", "regressions"]
