"""benchmarks/kernel_breakdown.py's pure parts: the K=V parser and the per-kernel table."""
from __future__ import annotations

import pytest

from benchmarks.kernel_breakdown import kernel_times, launch_sequence, parse_kv


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


def test_launch_sequence_by_position() -> None:
    ev = [("fill", 9.0), ("score", 10.0), ("pass", 2.0), ("pass", 4.0), ("fill", 9.0), ("score", 12.0),
          ("pass", 4.0), ("pass", 6.0)]
    assert launch_sequence(ev, calls=2, skip={"fill"}) == [("score", 11.0), ("pass", 3.0), ("pass", 5.0)]
    assert launch_sequence(ev[:-1], calls=2, skip={"fill"}) == []  # uneven: no sequence
    assert launch_sequence([("a", 1.0), ("b", 1.0), ("b", 1.0), ("a", 1.0)], calls=2, skip=set()) == []
