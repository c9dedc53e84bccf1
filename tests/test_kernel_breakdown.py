"""benchmarks/kernel_breakdown.py's pure parts: the K=V parser and the per-kernel table."""
from __future__ import annotations

import pytest

from benchmarks.kernel_breakdown import kernel_times, parse_kv


def test_parse_kv_types() -> None:
    assert parse_kv("batch=1,context=8192,profile=dsv32,f=0.25,ok=true,no=False") == {
        "batch": 1, "context": 8192, "profile": "dsv32", "f": 0.25, "ok": True, "no": False}
    assert parse_kv("") == {}


@pytest.mark.parametrize("bad", ["batch", "=3", "a=1,b"])
def test_parse_kv_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_kv(bad)


def test_kernel_times_per_call_and_skip() -> None:
    ev = [("score", 10.0), ("pass", 2.0), ("pass", 3.0), ("fill", 50.0), ("score", 12.0), ("pass", 1.0),
          ("pass", 2.0)]
    rows = kernel_times(ev, calls=2, skip={"fill"})
    assert rows == [("score", 1.0, 11.0), ("pass", 2.0, 4.0)]
