"""Test setup: without a GPU every kernel runs through Triton's CPU interpreter.

TRITON_INTERPRET must be set before any kernel module is imported, so it is set here.
"""
from __future__ import annotations

import os

import pytest
import torch

HAS_GPU = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")
if not HAS_GPU:
    os.environ["TRITON_INTERPRET"] = "1"
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

DEVICE = "cuda" if HAS_GPU else "cpu"

# CI must be deterministic: property tests replay the same examples there (CI=true);
# elsewhere they explore new ones every run, and a failure found that way becomes a test.
from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip)


@pytest.fixture
def device() -> str:
    return DEVICE
