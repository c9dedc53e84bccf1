"""Benchmark: sparse MQA indexer (scoring + top-k) vs the chunked PyTorch pipeline vs the floor.

One run on one GPU: measures the ceilings (device-to-device copy bandwidth, empty
launch), then for every feasible workload of the grid verifies the config (tuned from
``--pack``, else the default) against the float64 reference on a few sequences and times
three things on the same inputs: the fused kernel returning indices only, the same
template's scoring alone (``top_k=0, return_logits=True``: what top-k costs on top), and
the PyTorch baseline (dequantize, einsum, relu, weighted sum, ``torch.topk``, chunked).
Raw numbers go to ``--out`` as JSON; the table printed last gives % of the HBM floor,
the top-k overhead and the speedup over the baseline, then the target checks.

    python benchmarks/sparse_mqa.py --pack packs/nvidia-h200 [--quick]
    python benchmarks/sparse_mqa.py --algos bound,radix --batch 1,32 --context 8192,131072,524288 --next-n 1
    python benchmarks/sparse_mqa.py --quick --algos radix,row --no-baseline --reps 20
    python benchmarks/sparse_mqa.py --profiles dsv41-flash --batch 32 --context 131072 --variant word:MX_WORD_DECODE=1

``--algos`` times each top-k path on the same inputs (``radix``: ``radix_config``; ``row``: ``row_config``, only up to the context the search space
admits it for; ``bound``: ``bound_config``; a tuned config of that path where the pack has one),
each verified first; the
scoring alone is timed once (the radix scoring kernel; the row path's also writes
its first-digit histograms, so its top-k overhead includes that). ``--variant NAME:K=V`` adds the config with
those overrides (e.g. ``MX_WORD_DECODE=1``), verified, with its own scoring time.
"""
from __future__ import annotations

import argparse
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

log = logging.getLogger("bench.sparse_mqa")
VERIFY_SEQS = 4  # sequences checked against the (per-sequence, float64) reference per workload


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pack", type=Path, default=None, help="tuned kernel pack (defaults where an entry is missing)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "raw", help="folder for the raw JSON")
    p.add_argument("--quick", action="store_true", help="only batch 1 and 32, next_n 1")
    p.add_argument("--profiles", default="dsv32,dsv41-flash", help="comma-separated profiles")
    p.add_argument("--no-baseline", action="store_true", help="skip the PyTorch baseline")
    p.add_argument("--reps", type=int, default=50, help="timed repetitions per measurement")
    p.add_argument("--algos", default=None, help="comma-separated top-k paths to compare (radix,row,bound)")
    p.add_argument("--batch", default=None, help="comma-separated batch sizes (filter)")
    p.add_argument("--context", default=None, help="comma-separated contexts (filter)")
    p.add_argument("--next-n", default=None, help="comma-separated next_n (filter)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME:K=V[,K=V]",
                   help="also verify and time the config with these overrides (scoring alone and the whole "
                        "call), e.g. word:MX_WORD_DECODE=1; skipped where the search space's constraints refuse it")
    return p.parse_args(argv)


def measure_ceilings(reps: int) -> dict[str, float]:
    """Device-to-device copy bandwidth (read + write) and the empty-launch time."""
    from tuner.roofline import measure_ceilings as measure

    return measure(reps=reps)


def workloads(args: argparse.Namespace) -> list[Any]:
    from search_spaces.sparse_mqa import WORKLOADS

    profs = args.profiles.split(",")
    ws = [w for w in WORKLOADS if w.profile in profs]
    if args.quick:
        ws = [w for w in ws if w.batch in (1, 32) and w.next_n == 1]
    for name, attr in (("batch", "batch"), ("context", "context"), ("next_n", "next_n")):
        want = getattr(args, name)
        if want:
            keep = {int(v) for v in want.split(",")}
            ws = [w for w in ws if getattr(w, attr) in keep]
    return ws


def algo_configs(w: Any, config: dict[str, Any], args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """(label, config) per compared top-k path; without ``--algos`` the one config."""
    from kernel_templates import sparse_mqa as M
    from tuner.runtime.target import Target

    variants = [(label, dict(config, **over)) for label, over in parse_variants(args.variant)]
    variants = [(a, c) for a, c in variants if admitted(w, c)]
    if not args.algos:
        return [("", config)] + variants
    out = []
    for a in args.algos.split(","):
        make = {"radix": M.radix_config, "row": M.row_config, "bound": M.bound_config}.get(a)
        if make is None:
            raise SystemExit(f"unknown top-k path {a!r} (radix, row, bound)")
        c = config if config["TOPK_ALGO"] == a else make(w, Target.of("cuda"))
        if a != "row" or admitted(w, c):
            out.append((a, c))
    return out + variants


def parse_variants(specs: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """``NAME:K=V,K=V`` -> (NAME, {K: V}); values are ints where they parse, else strings."""
    out = []
    for spec in specs:
        name, _, body = spec.partition(":")
        over: dict[str, Any] = {}
        for kv in filter(None, body.split(",")):
            k, _, v = kv.partition("=")
            try:
                over[k] = int(v)
            except ValueError:
                over[k] = v
        out.append((name, over))
    return out


def admitted(w: Any, config: dict[str, Any]) -> bool:
    """The search space admits the variant on this GPU (in the space, canonical, within the constraints)."""
    from search_spaces import sparse_mqa as S
    from tuner.runtime.target import Target

    t = Target.of("cuda")
    cfg = {k: bool(v) if isinstance(S.SPACE[k].values()[0], bool) else v for k, v in config.items()}
    ok = S.SPACE.contains(cfg) and S.SPACE.canonical(cfg, w, t) == cfg and S.constraints(cfg, w, t)
    if not ok:
        log.info("%s: %s not admitted by the search space, skipped", w, config)
    return ok


def _slice(inputs: dict[str, Any], n: int) -> dict[str, Any]:
    out = dict(inputs)
    for k in ("q", "weights", "block_table", "seq_lens"):
        out[k] = out[k][:n]
    return out


def run_one(w: Any, config: dict[str, Any], how: str, ceilings: dict[str, float], args: argparse.Namespace
            ) -> dict[str, Any]:
    import torch

    from kernel_templates import sparse_mqa as M
    from tuner.spec import workload_dict
    from tuner.timing import bench, bench_kernel

    rec: dict[str, Any] = {"workload": workload_dict(w), "config": config, "config_from": how}
    inputs = M.make_inputs(w, "cuda", 0)
    sub = _slice(inputs, VERIFY_SEQS)
    ref = M.reference(**sub)
    hbm = ceilings["hbm_bytes_per_s"]
    nbytes, flops = M.cost(w)
    score_only = dict(inputs, top_k=0, return_logits=True)
    ts = bench_kernel(M.SPEC, lambda: M.launch(config=config, **score_only), reps=args.reps)
    logit_bytes = 4 * w.batch * w.next_n * w.context
    rec.update(bytes=nbytes, flops=flops, floor_us=nbytes / hbm * 1e6, score_us=ts.median_us,
               score_floor_us=(nbytes + logit_bytes) / hbm * 1e6,
               score_pct_floor=100 * (nbytes + logit_bytes) / hbm / (ts.median_us * 1e-6))
    runs = []
    variant_names = {name for name, _ in parse_variants(args.variant)}
    for label, cfg in algo_configs(w, config, args):
        r: dict[str, Any] = {"algo": label or cfg["TOPK_ALGO"], "config": cfg}
        if label in variant_names:  # its own scoring time, the logits verified on the reference's sequences
            r["variant"] = True
            try:
                sub0 = dict(sub, top_k=0, return_logits=True)
                M.verify(M.launch(config=cfg, **sub0), M.reference(**sub0), sub0)
                tv = bench_kernel(M.SPEC, lambda: M.launch(config=cfg, **score_only), reps=args.reps)
                r.update(score_us=tv.median_us, score_pct_floor=100 * (nbytes + logit_bytes) / hbm
                         / (tv.median_us * 1e-6))
            except AssertionError as e:
                r.update(verified=False, error=f"scoring: {e}")
                runs.append(r)
                continue
        try:
            M.verify(M.launch(config=cfg, **sub), ref, sub)
            M.verify(M.launch(config=cfg, **inputs)[:VERIFY_SEQS], ref, sub)
            # the whole batch: exactly the top-k of the kernel's own logits
            idx, logits = M.launch(config=cfg, **dict(inputs, return_logits=True))
            want = M.topk_of_logits(logits, inputs["top_k"])
            r["rows_wrong_vs_own_logits"] = int((idx != want).any(-1).sum())
            r["verified"] = r["rows_wrong_vs_own_logits"] == 0
            del idx, logits, want
        except AssertionError as e:
            r.update(verified=False, error=str(e))
        if r["verified"]:
            t = bench_kernel(M.SPEC, lambda: M.launch(config=cfg, **inputs), reps=args.reps)
            r.update(median_us=t.median_us, p20_us=t.p20_us, p80_us=t.p80_us,
                     pct_floor=100 * nbytes / hbm / (t.median_us * 1e-6), topk_overhead=t.median_us / (r["score_us"] if r.get("variant") else ts.median_us) - 1)
        runs.append(r)
    rec["runs"] = runs
    # the workload's own config (the pack's, else the default): with --algos it is the column of its path
    plain = [r for r in runs if not r.get("variant")]
    main_run = next((r for r in plain if r["config"] == config), plain[-1])
    rec["verified"] = all(r["verified"] for r in runs)
    if not rec["verified"]:
        rec["error"] = "; ".join(f"{r['algo']}: {r.get('error', 'rows wrong vs own logits')}" for r in runs
                                 if not r["verified"])
    for k in ("median_us", "p20_us", "p80_us", "pct_floor", "topk_overhead"):
        if k in main_run:
            rec[k] = main_run[k]
    if not args.no_baseline and "median_us" in rec:
        try:
            M.verify(M.torch_eager(**sub), ref, sub)
            tb = bench(lambda: M.torch_eager(**inputs), reps=max(5, args.reps // 5), max_seconds=20)
            rec["baseline_us"] = tb.median_us
            rec["speedup_vs_baseline"] = tb.median_us / rec["median_us"]
        except torch.cuda.OutOfMemoryError:
            rec["baseline_us"] = None
            rec["baseline_skipped"] = "out of memory"
    inputs = score_only = sub = None  # free the device memory before the next workload
    torch.cuda.empty_cache()
    return rec


def summarize(records: list[dict[str, Any]]) -> list[str]:
    """Table rows (strings) and the target checks."""
    lines = [f"{'profile':12} {'n':>1} {'ctx':>7} {'B':>4} {'us':>9} {'%floor':>6} {'score us':>9} {'%floor':>6} "
             f"{'topk +%':>7} {'base us':>10} {'speedup':>7}"]
    checks = []
    key = lambda r: (r["workload"]["profile"], r["workload"]["next_n"], r["workload"]["context"],  # noqa: E731
                     r["workload"]["batch"])
    for r in sorted(records, key=key):
        p, n, ctx, b = key(r)
        if "median_us" not in r:
            lines.append(f"{p:12} {n:>1} {ctx:>7} {b:>4}  FAILED: {r.get('error', '')[:70]}")
            continue
        sp = r.get("speedup_vs_baseline")
        lines.append(f"{p:12} {n:>1} {ctx:>7} {b:>4} {r['median_us']:>9.1f} {r['pct_floor']:>6.0f} "
                     f"{r['score_us']:>9.1f} {r['score_pct_floor']:>6.0f} {100 * r['topk_overhead']:>7.0f} "
                     f"{(r.get('baseline_us') or float('nan')):>10.1f} {(sp or float('nan')):>7.1f}")
        tag = f"{p} n={n} ctx={ctx} B={b}"
        if ctx == 524288 and sp:
            checks.append((f"{tag}: >= 20x baseline", sp >= 20, f"{sp:.1f}x"))
        if ctx >= 131072:
            checks.append((f"{tag}: scoring >= 60% of HBM floor", r["score_pct_floor"] >= 60,
                           f"{r['score_pct_floor']:.0f}%"))
        checks.append((f"{tag}: top-k adds <= 30%", r["topk_overhead"] <= 0.30, f"{100 * r['topk_overhead']:.0f}%"))
    multi = [r for r in records if len(r.get("runs", [])) > 1]
    if multi:
        algos = [x["algo"] for x in multi[0]["runs"]]
        lines.append("top-k paths (us; +% over the scoring alone):")
        lines.append(f"{'profile':12} {'n':>1} {'ctx':>7} {'B':>4} {'score':>8} " +
                     " ".join(f"{a:>16}" for a in algos) + f" {'speedup':>8}")
        for r in sorted(multi, key=key):
            p, n, ctx, b = key(r)
            cells, ts = [], []
            for x in r["runs"]:
                if "median_us" in x:
                    cells.append(f"{x['median_us']:>9.1f} {100 * x['topk_overhead']:>+5.0f}%")
                    ts.append(x["median_us"])
                else:
                    cells.append(f"{'FAILED':>16}")
                    ts.append(float("nan"))
            sp = ts[0] / ts[-1] if len(ts) > 1 else float("nan")
            lines.append(f"{p:12} {n:>1} {ctx:>7} {b:>4} {r['score_us']:>8.1f} " + " ".join(cells) + f" {sp:>7.1f}x")
    var = [r for r in records if any(x.get("variant") for x in r.get("runs", []))]
    if var:
        lines.append("variants (scoring alone us, % of its floor; whole call us):")
        for r in sorted(var, key=key):
            p, n, ctx, b = key(r)
            cells = [f"{x['algo']}: " + (f"score {x['score_us']:.1f} ({x['score_pct_floor']:.0f}%), "
                                          f"call {x.get('median_us', float('nan')):.1f}" if "score_us" in x
                                          else f"FAILED {x.get('error', '')[:60]}")
                     for x in r["runs"] if x.get("variant")]
            lines.append(f"{p:12} {n:>1} {ctx:>7} {b:>4} base score {r['score_us']:.1f} "
                         f"({r['score_pct_floor']:.0f}%); " + "; ".join(cells))
    return lines + target_lines(checks)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU: this benchmark only runs on one", file=sys.stderr)
        return 2
    from kernel_templates import sparse_mqa as M
    from tuner import runtime
    from tuner.runtime.env import gpu_identity
    from tuner.runtime.target import Target
    from tuner.spec import workload_dict

    pack = runtime.load_pack(args.pack) if args.pack else None
    ceilings = measure_ceilings(args.reps)
    log.info("ceilings: copy %.2f TB/s, empty launch %.1f us", ceilings["hbm_bytes_per_s"] / 1e12,
             ceilings["empty_launch_us"])
    path = raw_path(args.out, "sparse_mqa")
    records, skipped = [], []

    def save() -> None:
        write_raw(path, {"gpu": gpu_identity(), "ceilings": ceilings, "pack": str(args.pack) if args.pack else None,
                         "bytes_per_key": M.BYTES_PER_KEY, "records": records, "skipped": skipped})
    for w in workloads(args):
        reason = M.feasible(w)
        if reason:
            log.info("skip %s: %s", w, reason)
            skipped.append({"workload": workload_dict(w), "reason": reason})
            continue
        if pack is not None:
            sel = pack.select("sparse_mqa", workload_dict(w), Target.of("cuda"))
            cfg, how = sel.config, sel.how
        else:
            cfg, how = M.default_config(w, Target.of("cuda")), "default"
        t0 = time.perf_counter()
        try:
            rec = run_one(w, cfg, how, ceilings, args)
        except torch.cuda.OutOfMemoryError as e:
            rec = {"workload": workload_dict(w), "config": cfg, "error": f"out of memory: {e}"}
            torch.cuda.empty_cache()
        parts = [f"{x['algo']} {x['median_us']:.1f} us (+{100 * x['topk_overhead']:.0f}%)" if "median_us" in x
                 else f"{x['algo']} FAILED {x.get('error', 'rows wrong vs own logits')[:80]}" for x in rec.get("runs", [])]
        log.info("%s %s: score %s us; %s (%.0fs)", w, how, f"{rec.get('score_us', float('nan')):.1f}",
                 "; ".join(parts) or rec.get("error", ""), time.perf_counter() - t0)
        records.append(rec)
        save()  # after every workload: a run cut short keeps what it measured
    save()  # the skipped workloads after the last one measured (or all of them)
    print(f"raw results: {path}")
    print("\n".join(summarize(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
