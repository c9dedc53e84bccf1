"""Mean SM clock and power over each timed phase of an engram overlap run.

Reads the JSON lines an ``engram_sweep.py --overlap-configs`` run prints (each with the
host wall-clock ``spans`` of its lookup / layer / both phases) and a CSV from
``nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 10``
sampled meanwhile; prints one line per measured config. Question it answers: does the
lookup slow down beside the GEMMs because the clocks drop? (On an H200: no, 1980 MHz in every phase.)

    python3 benchmarks/clock_spans.py sweep.log clocks.csv
"""
from __future__ import annotations

import json
import sys
from datetime import datetime


def _samples(path: str) -> list[tuple[float, float, float]]:
    out = []
    for line in open(path):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3:
            continue
        try:
            t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append((t, float(parts[1].split()[0]), float(parts[2].split()[0])))
        except ValueError:
            continue  # a header or a line cut short
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    try:
        samples = _samples(argv[1])
        lines = open(argv[0]).readlines()
    except OSError as e:
        print(f"clock_spans: {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    for line in lines:
        if not line.startswith('{"part": "overlap"'):
            continue
        r = json.loads(line)
        cells = []
        for phase, span in r.get("spans", {}).items():
            # one (start, end) a phase, or one a round: the rounds' samples together
            spans = [span] if isinstance(span[0], (int, float)) else span
            win = [s for s in samples if any(a <= s[0] <= b for a, b in spans)]
            if win:
                cells.append(f"{phase} {sum(s[1] for s in win) / len(win):.0f} MHz "
                             f"{sum(s[2] for s in win) / len(win):.0f} W ({len(win)})")
            else:
                cells.append(f"{phase} no samples")
        c = r["config"]
        print(f"T={r['tokens']}{' uniform' if r.get('uniform_rows') else ''} {c['ROWS']}r {c['num_warps']}w "
              f"{100 * r['hidden_fraction']:.0f}% hidden: " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
