"""Where a kernel's warps sit, from Nsight Compute's per-instruction stall samples (no GPU).

    ncu ... --section SourceCounters --section WarpStateStats -o rep python3 benchmarks/ncu_probe.py ...
    ncu --import rep.ncu-rep --page source --print-source sass --csv > sass.csv
    python3 benchmarks/ncu_stalls.py sass.csv [--top 12] [--min-share 0.01]

Prints the stall reasons over all samples, the samples by opcode (with each opcode's top
reasons), and the instructions holding at least ``--min-share`` of the samples. A warp-
specialised kernel's partitions show up as separate code regions: the ``try_wait`` branch
(``SYNCS.PHASECHK`` then ``@!P BRA``) a partition spins on names the barrier it waits for
(that is how the nvfp4 GL_WS kernel's wall was found).

Exit status: 2 for a file that is not such a CSV (one line).
"""
from __future__ import annotations

import argparse
import csv
import io
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

SAMPLES = "Warp Stall Sampling (All Samples)"


def _num(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def _opcode(source: str) -> str:
    """``@!P1  BRA 0x...`` -> ``BRA``; ``HGMMA.64x64x16.F32 ...`` -> ``HGMMA``."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def parse(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """The stall-reason columns and the instruction rows of ``ncu --page source --csv``: a
    ``"Kernel Name",...`` line, the column header, one row a SASS instruction."""
    rows = list(csv.reader(io.StringIO(text)))
    start = next((i for i, r in enumerate(rows) if SAMPLES in r and "Source" in r), None)
    if start is None:
        raise ValueError(f"no {SAMPLES!r} column: not the CSV of `ncu --page source --print-source sass --csv`")
    header = rows[start]
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    body = [dict(zip(header, r)) for r in rows[start + 1:] if len(r) >= len(header)]
    return reasons, body


def summarize(text: str, min_share: float = 0.01) -> dict[str, Any]:
    """Shares (of all samples) by stall reason, by opcode (with its top reasons), and the
    instructions at ``min_share`` or more, in address order."""
    reasons, body = parse(text)
    total = sum(_num(r[SAMPLES]) for r in body) or 1.0
    by_reason: Counter = Counter()
    by_op: Counter = Counter()
    op_reasons: dict[str, Counter] = defaultdict(Counter)
    hot = []
    for k, r in enumerate(body):
        n = _num(r[SAMPLES])
        op = _opcode(r.get("Source", ""))
        by_op[op] += n
        why = Counter({c[len("stall_"):]: _num(r[c]) for c in reasons})
        by_reason.update(why)
        op_reasons[op].update(why)
        if n / total >= min_share:
            hot.append({"index": k, "address": r.get("Address", ""), "source": r.get("Source", "").strip(),
                        "share": n / total, "executed": _num(r.get("Instructions Executed", "0")),
                        "top": [w for w, v in why.most_common(2) if v]})
    return {"samples": total,
            "reasons": [(w, v / total) for w, v in by_reason.most_common() if v],
            "opcodes": [(op, v / total, [w for w, x in op_reasons[op].most_common(3) if x])
                        for op, v in by_op.most_common() if v],
            "hot": hot}


def report(summary: dict[str, Any], top: int) -> list[str]:
    lines = [f"{summary['samples']:.0f} samples", "stall reasons:"]
    lines += [f"  {w:22s} {s * 100:5.1f}%" for w, s in summary["reasons"][:top]]
    lines.append("by opcode (top reasons):")
    lines += [f"  {op:12s} {s * 100:5.1f}%  {', '.join(ws)}" for op, s, ws in summary["opcodes"][:top]]
    lines.append("instructions:")
    lines += [f"  {h['index']:5d} {h['share'] * 100:5.1f}%  x{h['executed']:<9.0f} {h['source'][:72]:72s} "
              f"{', '.join(h['top'])}" for h in summary["hot"]]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path, help="output of `ncu --import R --page source --print-source sass --csv`")
    ap.add_argument("--top", type=int, default=12, help="reasons and opcodes listed (default 12)")
    ap.add_argument("--min-share", type=float, default=0.01, help="instructions listed from this share of samples")
    a = ap.parse_args(argv)
    try:
        summary = summarize(a.csv.read_text(errors="replace"), a.min_share)
    except (OSError, ValueError) as e:
        print(f"error: {a.csv}: {e}", file=sys.stderr)
        return 2
    print("\n".join(report(summary, a.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
