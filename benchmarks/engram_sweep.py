"""GPU sweep for the Engram lookup: how grid size, warps, tile rows and pipelining move the
time, how much of a prefetched lookup an SM-lean config hides, and what the raw PCIe
gather rate is for other row layouts.

Three parts, each with its own time budget (compiles dominate), one line per variant and
the whole table again at the end; raw rows go to ``--out`` as JSON:

1. ``lookup``: for each (placement, T) point, every config of a small grid (ROWS x warps x
   grid size x num_stages, outside the search space's limits where that is the question)
   is verified against the reference, then timed as the tuner times it
   (``tuner.timing.bench_kernel``).
2. ``overlap``: for host tables, the fastest configs at each grid size run through
   ``benchmarks/engram.py``'s overlap measurement (lookup prefetched on a side stream
   before a GEMM layer of equal duration, graph replay): does a lookup confined to a few
   SMs hide behind the layer?
3. ``gather``: raw random-row gathers over PCIe from pinned host memory with row strides
   264 (the table's), 256 and 512 bytes, 256 or 264 bytes read per row: is the 264-byte
   row (three to four 128-byte lines, unaligned) what caps the host rate?

    python benchmarks/engram_sweep.py [--points host:256,hbm:4096] [--budget 150]
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # for benchmarks/engram.py, _results.py (benchmarks is not a package)

from _results import raw_path, write_raw  # noqa: E402


def _gather_strided():
    import triton
    import triton.language as tl

    @triton.jit
    def gather(src_ptr, idx_ptr, dst_ptr, n, stride, W: tl.constexpr, EXTRA: tl.constexpr, ROWS: tl.constexpr):
        col = tl.arange(0, W)
        for blk in range(tl.program_id(0), tl.cdiv(n, ROWS), tl.num_programs(0)):
            j = blk * ROWS + tl.arange(0, ROWS)
            m = j < n
            base = tl.multiple_of(tl.load(idx_ptr + j, mask=m, other=0) * stride, 8)
            v = tl.load(src_ptr + base[:, None] + col[None, :], mask=m[:, None])
            tl.store(dst_ptr + j.to(tl.int64)[:, None] * W + col[None, :], v, mask=m[:, None])
            if EXTRA:
                e = tl.load(src_ptr + base + W, mask=m, other=0).to(tl.uint8)  # + the row's 8 scale bytes (one word)
                tl.store(dst_ptr + j, e, mask=m)

    return gather


def part_gather(rows_out: list, budget: float) -> None:
    import torch

    from tuner.timing import bench

    kern = _gather_strided()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    n_rows = 8 << 20
    n = 1 << 17
    t0 = time.time()
    for stride, w, extra in ((264, 256, True), (264, 256, False), (256, 256, False), (512, 256, True),
                             (288, 256, True)):
        if time.time() - t0 > budget:
            break
        host = torch.empty(n_rows * stride // 8, dtype=torch.int64, pin_memory=True)  # 8-B words
        host.view(torch.uint8).view(-1)[: 1 << 20].fill_(1)
        idx = torch.randint(0, n_rows, (n,), device="cuda")
        dst = torch.empty(n, w, dtype=torch.uint8, device="cuda")
        src = host.view(torch.uint8)
        best = (0.0, None)
        for rows, progs, nw in ((16, sms, 4), (32, 2 * sms, 4), (64, 4 * sms, 4), (64, 8 * sms, 8)):
            grid = (min(progs, (n + rows - 1) // rows),)
            t = bench(lambda: kern[grid](src, idx, dst, n, stride, W=w, EXTRA=extra, ROWS=rows, num_warps=nw),
                      reps=10, flush_l2=True)
            gbs = n * (w + (8 if extra else 0)) / t.median_us / 1e3
            best = max(best, (gbs, (rows, progs, nw)))
        line = {"part": "gather", "stride": stride, "bytes_read": w + (8 if extra else 0), "gb_per_s": best[0],
                "best": best[1]}
        print(json.dumps(line), flush=True)
        rows_out.append(line)
        host = idx = dst = src = None  # free the pinned buffer before the next stride


def _configs(placement: str, n_rows: int, sms: int) -> list[dict[str, Any]]:
    out = []
    host = placement != "hbm"
    fracs = (1 / 32, 1 / 16, 1 / 8, 0.25, 0.5, 1.0, 2.0) if host else (1.0, 2.0, 4.0, 8.0, 16.0)
    # grid size innermost: it changes the launch, not the compiled kernel
    for rows, nw, st, frac in itertools.product((32, 16, 64), (4, 8, 16, 2), (1, 3), fracs):
        if rows * 256 < 32 * nw * 8:        # fewer than 8 bytes a thread
            continue
        if rows * 256 > 64 * 32 * nw:       # more than 64 values a thread
            continue
        out.append(dict(ROWS=rows, VEC=8, DEDUP=False, GRID_SM_FRAC=frac, CHUNK_ROWS=0, num_warps=nw, num_stages=st))
    return out


def part_lookup(points: list[tuple[str, int]], rows_out: list, budget: float) -> dict:
    import torch

    from kernel_templates import engram as E
    from kernel_templates.engram import hashing as EH, lookup as EL
    from tuner.runtime.target import Target
    from tuner.timing import bench_kernel

    from engram import zipf_rows  # benchmarks/engram.py

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    size = 8 << 20
    params = EH.make_params(size, seed=0, device="cuda")
    keep: dict = {}
    per_point = budget / max(1, len(points))
    tables: dict = {}
    for placement, T in points:
        if placement not in tables:
            tables[placement] = E.EngramTable(size, placement, "cuda").fill_random_(seed=0)
        table = tables[placement]
        _, rows = zipf_rows(params, T)
        inputs = {"table": table, "rows": rows}
        ref = E.reference(**inputs)
        wl = E.Workload(T, table.placement, size)
        nbytes, _ = E.cost(wl)
        cfgs = [E.default_config(wl, Target.of("cuda"))] + _configs(placement, rows.numel(), sms)
        t0 = time.time()
        for i, cfg in enumerate(cfgs):
            if time.time() - t0 > per_point:
                break
            progs = EL.grid_programs(rows.numel(), cfg, sms)
            try:
                E.verify(EL.launch(config=cfg, **inputs), ref, inputs)
                t = bench_kernel(E.SPEC, lambda: EL.launch(config=cfg, **inputs), reps=30).median_us
                status = "ok"
            except Exception as e:  # noqa: BLE001 - a failing variant is a result, not the end
                t, status = float("nan"), f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
            line = {"part": "lookup", "placement": table.placement, "tokens": T, "default": i == 0,
                    "config": cfg, "programs": progs, "us": t, "gb_per_s": nbytes / t / 1e3, "status": status}
            print(json.dumps(line), flush=True)
            rows_out.append(line)
        keep[(table.placement, T)] = (table, rows)
    return keep


def part_overlap(keep: dict, rows_out: list, budget: float) -> None:
    from engram import _overlap  # benchmarks/engram.py

    t0 = time.time()
    for (placement, T), (table, rows) in keep.items():
        if placement == "hbm":
            continue
        ok = [r for r in rows_out if r["part"] == "lookup" and r["placement"] == placement and r["tokens"] == T
              and r["status"] == "ok"]
        best_by_grid: dict[int, dict] = {}
        for r in ok:
            g = r["programs"]
            if g not in best_by_grid or r["us"] < best_by_grid[g]["us"]:
                best_by_grid[g] = r
        for g in sorted(best_by_grid):
            for prio in (0, -1):  # the default stream priority, then the highest
                if time.time() - t0 > budget or (prio and g > 33):
                    continue
                r = best_by_grid[g]
                ov = _overlap(table, rows, r["config"], 30, rounds=1, priority=prio, cap=False)
                line = {"part": "overlap", "placement": placement, "tokens": T, "programs": g, "priority": prio,
                        **ov}
                print(json.dumps(line), flush=True)
                rows_out.append(line)


def part_overlap_configs(points: list[tuple[str, int]], configs: list[dict], size: int, rows_out: list,
                         uniform: bool = False) -> None:
    """Overlap of given configs only (each verified first): e.g. one-warp programs small
    enough to sit beside a GEMM's CTAs on every SM instead of taking SMs from it. With
    ``uniform`` the rows are uniformly random (few repeats, so little L2 reuse) instead of
    the Zipfian tokens' hashes."""
    import torch

    from kernel_templates import engram as E
    from kernel_templates.engram import hashing as EH, lookup as EL
    from tuner.runtime.target import Target

    from engram import _overlap, zipf_rows  # benchmarks/engram.py

    params = EH.make_params(size, seed=0, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for placement, T in points:
        table = E.EngramTable(size, placement, "cuda").fill_random_(seed=0)
        if uniform:
            g = torch.Generator(device="cuda").manual_seed(T)
            rows = torch.randint(0, size, (*EH.token_shape(T), EH.ROWS_PER_TOKEN), device="cuda", generator=g)
        else:
            _, rows = zipf_rows(params, T)
        inputs = {"table": table, "rows": rows}
        ref = E.reference(**inputs)
        for over in configs:
            cfg = dict(E.default_config(E.Workload(T, table.placement, size), Target.of("cuda")), **over)
            E.verify(EL.launch(config=cfg, **inputs), ref, inputs)
            ov = _overlap(table, rows, cfg, 30, rounds=1, cap=False)
            line = {"part": "overlap", "placement": placement, "tokens": T, "priority": 0, "uniform_rows": uniform,
                    "programs": EL.grid_programs(rows.numel(), cfg, sms), **ov}
            print(json.dumps(line), flush=True)
            rows_out.append(line)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--points", default="host:256,hbm:4096", help="placement:tokens pairs, comma-separated")
    p.add_argument("--budget", type=float, default=150.0, help="seconds for the lookup part (overlap: 1/3, gather: 1/4)")
    p.add_argument("--overlap-budget", type=float, default=None, help="seconds for the overlap part (default budget/3)")
    p.add_argument("--no-gather", action="store_true", help="skip the raw gather part")
    p.add_argument("--overlap-configs", default=None,
                   help="JSON list of partial configs: only measure their overlap at --points (no sweep)")
    p.add_argument("--table-rows", type=int, default=8 << 20, help="table rows for --overlap-configs")
    p.add_argument("--uniform-rows", action="store_true",
                   help="--overlap-configs on uniformly random rows (little L2 reuse) instead of Zipfian tokens")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "raw")
    a = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("engram_sweep needs a GPU", file=sys.stderr)
        return 2
    rows: list = []
    if a.overlap_configs:
        pts = [(x.split(":")[0], int(x.split(":")[1])) for x in a.points.split(",")]
        part_overlap_configs(pts, json.loads(a.overlap_configs), a.table_rows, rows, a.uniform_rows)
        for r in rows:
            c = r["config"]
            print(f"overlap {r['placement']} T={r['tokens']}{' uniform' if r['uniform_rows'] else ''} {r['programs']}p "
                  f"{c['ROWS']}r {c['num_warps']}w: lookup "
                  f"{r['lookup_us']:.1f} layer {r['layer_us']:.1f} both {r['both_us']:.1f} -> "
                  f"{100 * r['hidden_fraction']:.0f}% hidden")
        return 0
    if not a.no_gather:
        part_gather(rows, a.budget / 4)
    points = [(x.split(":")[0], int(x.split(":")[1])) for x in a.points.split(",")]
    keep = part_lookup(points, rows, a.budget)
    part_overlap(keep, rows, a.overlap_budget if a.overlap_budget is not None else a.budget / 3)
    path = write_raw(raw_path(a.out, "engram_sweep"), rows)
    print(f"raw: {path}")
    for key in sorted({(r.get("placement", ""), r.get("tokens", 0)) for r in rows if r["part"] == "lookup"}):
        sel = sorted((r for r in rows if r["part"] == "lookup" and (r["placement"], r["tokens"]) == key
                      and r["status"] == "ok"), key=lambda r: r["us"])
        dflt = [r for r in sel if r["default"]]
        print(f"{key[0]} T={key[1]}: default {dflt[0]['us']:.1f} us" if dflt else f"{key}: default failed",
              "| best:", "; ".join(f"{r['us']:.1f} us {r['programs']}p {r['config']['ROWS']}r "
                                   f"{r['config']['num_warps']}w s{r['config']['num_stages']}" for r in sel[:4]))
    for r in rows:
        if r["part"] == "overlap":
            print(f"overlap {r['placement']} T={r['tokens']} {r['programs']} programs prio {r['priority']}: lookup {r['lookup_us']:.1f} "
                  f"layer {r['layer_us']:.1f} both {r['both_us']:.1f} -> {100 * r['hidden_fraction']:.0f}% hidden")
        elif r["part"] == "gather":
            print(f"gather stride {r['stride']} read {r['bytes_read']} B: {r['gb_per_s']:.1f} GB/s {r['best']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
