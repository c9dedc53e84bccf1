"""Benchmark: NVFP4 / FP8 / BF16 decode attention vs the SDPA baseline vs the roofline floor.

One run on one GPU: measures the ceilings (device-to-device copy bandwidth, BF16 matmul
peak, empty launch), then for every feasible workload of the grid verifies the config
(tuned from ``--pack``, else the default) against the reference and times it, times the
"dequantize to BF16 + SDPA" baseline, and writes the raw numbers as JSON under ``--out``.
The table printed last gives achieved bandwidth, % of HBM, % of the roofline floor,
nvfp4 / fp8 / bf16 speedups of the same template, and the speedup over SDPA.

    python benchmarks/nvfp4_attention.py --pack packs/nvidia-h200 [--quick]
    python benchmarks/nvfp4_attention.py --kv-dtypes nvfp4 --modes dense --heads 16 --no-baseline \
        --variants '{"gluon": {"GLUON": true}}'

``--variants`` (JSON: name -> partial config): each is laid over the workload's pack or
default config and measured after it, verified first like every config; they are listed
under the main table with their time against the main config's.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # benchmarks/_results.py (benchmarks is not a package)

from _results import raw_path, target_lines, write_raw  # noqa: E402

log = logging.getLogger("bench.nvfp4_attention")
VERIFY_SEQS = 8  # sequences checked against the (per-sequence, fp32) reference per workload


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pack", type=Path, default=None, help="tuned kernel pack (defaults where an entry is missing)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "raw", help="folder for the raw JSON")
    p.add_argument("--quick", action="store_true", help="only the target points (H=16/64, batch 16/64, 32K/128K)")
    p.add_argument("--kv-dtypes", default="nvfp4,fp8,bf16", help="comma-separated KV dtypes")
    p.add_argument("--modes", default="dense,sparse", help="comma-separated modes")
    p.add_argument("--batch", default=None, help="comma-separated batch sizes (filter)")
    p.add_argument("--context", default=None, help="comma-separated contexts (filter)")
    p.add_argument("--heads", default=None, help="comma-separated head counts (filter)")
    p.add_argument("--no-baseline", action="store_true", help="skip the SDPA baseline")
    p.add_argument("--baseline-contexts", default="131072",
                   help="contexts at which the (slow) SDPA baseline runs, comma-separated, or 'all' "
                        "(default: 131072, where the 2x target is checked)")
    p.add_argument("--reps", type=int, default=50, help="timed repetitions per measurement")
    p.add_argument("--variants", default=None, metavar="JSON",
                   help='name -> partial config laid over each workload\'s config, e.g. \'{"gluon": {"GLUON": true}}\'')
    return p.parse_args(argv)


def measure_ceilings(reps: int) -> dict[str, float]:
    """Device-to-device copy bandwidth (read + write), BF16 matmul peak, empty launch."""
    from tuner.roofline import measure_ceilings as measure

    return measure(reps=reps, matmul=True)


def workloads(args: argparse.Namespace) -> list[Any]:
    from search_spaces.nvfp4_attention import WORKLOADS

    kvs, modes = args.kv_dtypes.split(","), args.modes.split(",")
    ws = [w for w in WORKLOADS if w.kv_dtype in kvs and w.mode in modes]
    if args.quick:
        ws = [w for w in ws if w.batch in (16, 64) and w.context in (32768, 131072)]
    for axis in ("batch", "context", "heads"):
        if getattr(args, axis):
            keep = {int(x) for x in getattr(args, axis).split(",")}
            ws = [w for w in ws if getattr(w, axis) in keep]
    return ws


def _slice(inputs: dict[str, Any], n: int) -> dict[str, Any]:
    out = dict(inputs)
    for k in ("q", "block_table", "seq_lens", "swa_kv", "swa_scales", "topk_idx"):
        if out.get(k) is not None:
            out[k] = out[k][:n]
    return out


def run_one(w: Any, config: dict[str, Any], how: str, ceilings: dict[str, float], args: argparse.Namespace,
            baseline: bool = True) -> dict[str, Any]:
    import torch

    from kernel_templates import nvfp4_attention as A
    from tuner.spec import workload_dict
    from tuner.timing import bench, bench_kernel

    rec: dict[str, Any] = {"workload": workload_dict(w), "config": config, "config_from": how}
    inputs = A.make_inputs(w, "cuda", 0)
    out = A.launch(config=config, **inputs)
    sub = _slice(inputs, VERIFY_SEQS)
    try:
        A.verify(out[:VERIFY_SEQS], A.reference(**sub), sub)
        rec["verified"] = True
    except AssertionError as e:
        rec.update(verified=False, error=str(e))
        return rec
    t = bench_kernel(A.SPEC, lambda i=inputs: A.launch(config=config, **i), reps=args.reps)
    nbytes, flops = A.cost(w)
    floor_s = max(nbytes / ceilings["hbm_bytes_per_s"], flops / ceilings["bf16_flops_per_s"])
    sec = t.median_us * 1e-6
    rec.update(median_us=t.median_us, p20_us=t.p20_us, p80_us=t.p80_us, bytes=nbytes, flops=flops,
               bytes_per_entry=A.BYTES_PER_ENTRY[w.kv_dtype], achieved_bytes_per_s=nbytes / sec,
               pct_hbm=100 * nbytes / sec / ceilings["hbm_bytes_per_s"],
               pct_mma=100 * flops / sec / ceilings["bf16_flops_per_s"], floor_us=floor_s * 1e6,
               pct_floor=100 * floor_s / sec)
    ctxs = args.baseline_contexts
    if baseline and not args.no_baseline and (ctxs == "all" or str(w.context) in ctxs.split(",")):
        try:
            A.verify(A.torch_eager(**sub), A.reference(**sub), sub)
            tb = bench(lambda i=inputs: A.torch_eager(**i), reps=max(5, args.reps // 5), max_seconds=20)
            rec["sdpa_us"] = tb.median_us
            rec["speedup_vs_sdpa"] = tb.median_us / t.median_us
        except torch.cuda.OutOfMemoryError:
            rec["sdpa_us"] = None
            rec["sdpa_skipped"] = "out of memory (the whole cache dequantized to BF16)"
    del inputs, out
    torch.cuda.empty_cache()
    return rec


def summarize(records: list[dict[str, Any]]) -> list[str]:
    """Table rows (strings) and the target checks."""
    by: dict[tuple, dict[str, dict[str, Any]]] = {}
    for r in records:
        if r.get("variant"):
            continue
        w = r["workload"]
        by.setdefault((w["mode"], w["heads"], w["context"], w["batch"]), {})[w["kv_dtype"]] = r
    lines = [f"{'mode':6} {'H':>3} {'ctx':>7} {'B':>4} {'kv':6} {'B/ent':>5} {'us':>9} {'GB/s':>7} {'%HBM':>5} "
             f"{'%MMA':>5} {'%floor':>6} {'vs fp8':>6} {'vs bf16':>7} {'vs SDPA':>7}"]
    checks = []
    for key in sorted(by):
        row = by[key]
        for kv in ("nvfp4", "fp8", "bf16"):
            r = row.get(kv)
            if r is None:
                continue
            if "median_us" not in r:
                lines.append(f"{key[0]:6} {key[1]:>3} {key[2]:>7} {key[3]:>4} {kv:6}  FAILED: {r.get('error', '')[:60]}")
                continue
            vs = {o: row[o]["median_us"] / r["median_us"] for o in ("fp8", "bf16")
                  if o != kv and o in row and "median_us" in row[o]}
            sdpa = r.get("speedup_vs_sdpa")
            lines.append(f"{key[0]:6} {key[1]:>3} {key[2]:>7} {key[3]:>4} {kv:6} {r['bytes_per_entry']:>5} "
                         f"{r['median_us']:>9.1f} {r['achieved_bytes_per_s'] / 1e9:>7.0f} {r['pct_hbm']:>5.0f} "
                         f"{r['pct_mma']:>5.0f} {r['pct_floor']:>6.0f} "
                         f"{vs.get('fp8', float('nan')):>6.2f} {vs.get('bf16', float('nan')):>7.2f} "
                         f"{(sdpa if sdpa else float('nan')):>7.2f}")
            mode, h, ctx, b = key
            if kv != "nvfp4" or mode != "dense":
                continue
            if h == 16 and ctx >= 32768 and b >= 8:
                checks.append((f"H=16 ctx={ctx} B={b}: nvfp4 >= 75% HBM", r["pct_hbm"] >= 75, f"{r['pct_hbm']:.0f}%"))
                if "fp8" in vs:
                    checks.append((f"H=16 ctx={ctx} B={b}: nvfp4 >= 1.6x fp8", vs["fp8"] >= 1.6, f"{vs['fp8']:.2f}x"))
            if h == 64:
                checks.append((f"H=64 ctx={ctx} B={b}: >= 60% BF16 MMA", r["pct_mma"] >= 60, f"{r['pct_mma']:.0f}%"))
            if ctx == 131072 and sdpa:
                checks.append((f"H={h} ctx=128K B={b}: >= 2x SDPA", sdpa >= 2, f"{sdpa:.2f}x"))
    var = [r for r in records if r.get("variant")]
    if var:
        lines.append("variants (us, % HBM; x = the main config's time / the variant's):")
    for r in var:
        w = r["workload"]
        main = by.get((w["mode"], w["heads"], w["context"], w["batch"]), {}).get(w["kv_dtype"], {})
        head = f"  {w['mode']:6} H={w['heads']:<3} ctx={w['context']:<7} B={w['batch']:<4} {w['kv_dtype']:6} {r['variant']:12}"
        if "median_us" not in r:
            lines.append(f"{head} FAILED: {r.get('error', '')[:70]}")
            continue
        x = main["median_us"] / r["median_us"] if "median_us" in main else float("nan")
        lines.append(f"{head} {r['median_us']:9.1f} us {r['pct_hbm']:5.1f}% HBM  x{x:.2f}")
    return lines + target_lines(checks)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU: this benchmark only runs on one", file=sys.stderr)
        return 2
    from kernel_templates import nvfp4_attention as A
    from tuner import runtime
    from tuner.runtime.target import Target
    from tuner.spec import workload_dict

    pack = runtime.load_pack(args.pack) if args.pack else None
    ceilings = measure_ceilings(args.reps)
    log.info("ceilings: copy %.2f TB/s, bf16 mm %.0f TFLOP/s, empty launch %.1f us",
             ceilings["hbm_bytes_per_s"] / 1e12, ceilings["bf16_flops_per_s"] / 1e12, ceilings["empty_launch_us"])
    from tuner.runtime.env import gpu_identity

    path = raw_path(args.out, "nvfp4_attention")
    records, skipped = [], []

    def save() -> None:
        write_raw(path, {"gpu": gpu_identity(), "ceilings": ceilings, "pack": str(args.pack) if args.pack else None,
                         "kv_bytes_per_token": A.BYTES_PER_ENTRY, "records": records, "skipped": skipped})

    variants = json.loads(args.variants) if args.variants else {}
    for w in workloads(args):
        reason = A.feasible(w)
        if reason:
            log.info("skip %s: %s", w, reason)
            skipped.append({"workload": workload_dict(w), "reason": reason})
            continue
        if pack is not None:
            sel = pack.select("nvfp4_attention", workload_dict(w))
            cfg, how = sel.config, sel.how
        else:
            cfg, how = A.default_config(w, Target.of("cuda")), "default"
        t0 = time.perf_counter()
        try:
            rec = run_one(w, cfg, how, ceilings, args)
        except torch.cuda.OutOfMemoryError as e:
            rec = {"workload": workload_dict(w), "config": cfg, "error": f"out of memory: {e}"}
            torch.cuda.empty_cache()
        sdpa = rec.get("sdpa_us")
        log.info("%s %s: %s us%s (%.0fs)", w, how, f"{rec.get('median_us', float('nan')):.1f}",
                 f", SDPA {sdpa:.1f} us" if sdpa else "", time.perf_counter() - t0)
        records.append(rec)
        for vname, over in variants.items():
            vcfg = dict(cfg, **over)
            t0 = time.perf_counter()
            try:
                vrec = run_one(w, vcfg, f"variant {vname}", ceilings, args, baseline=False)
            except (torch.cuda.OutOfMemoryError, ValueError) as e:
                vrec = {"workload": workload_dict(w), "config": vcfg, "error": f"{type(e).__name__}: {e}"}
                torch.cuda.empty_cache()
            vrec["variant"] = vname
            log.info("%s variant %s: %s us (%.0fs)%s", w, vname, f"{vrec.get('median_us', float('nan')):.1f}",
                     time.perf_counter() - t0, "" if "median_us" in vrec else f" {vrec.get('error', '')[:200]}")
            records.append(vrec)
        save()  # after every workload: a run cut short keeps what it measured
    save()  # the skipped workloads after the last one measured (or all of them)
    print(f"raw results: {path}")
    print("KV bytes per token: nvfp4 288, fp8 528, bf16 1024 (+ 528 per SWA entry)")
    print("\n".join(summarize(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
