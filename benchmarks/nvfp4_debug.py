"""GPU debug sweep for the NVFP4 decode attention template: which variant computes what.

For a small ragged workload per kv_dtype and mode it runs the combinations of the
template's switches (DQ_FP16, SWAP_AB, BLOCK_N, BLOCK_H, NUM_SPLITS, num_warps) against
the fp32 reference and prints one line per variant: the variant, the max abs error,
pass / fail (``verify``) and the time in us (``tuner.timing.bench``). Two probes come
first: the fp16 fast dequant helper alone, and ``tl.dot`` on fp16 subnormals (the old
DQ_FP16 path fed 2^-14-scaled, mostly subnormal fp16 to the MMA). Then the default
config (and a few variants) at the first points of the default grid, timed.

Compiles dominate the run time, so variants are ordered by how much they tell and the
sweep stops starting new ones after ``--budget`` seconds (default 75); the table printed
last lists every line again.

    python benchmarks/nvfp4_debug.py [--budget 75] [--only nvfp4]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", type=float, default=75.0, help="seconds after which no new variant is started")
    p.add_argument("--only", default="nvfp4,fp8,bf16", help="comma-separated kv dtypes")
    p.add_argument("--reps", type=int, default=20, help="timed repetitions per variant")
    return p.parse_args(argv)


def _probe_dequant(rows: list) -> None:
    import torch

    from kernel_templates import nvfp4 as F
    x = torch.randn(4096, 512, device="cuda")
    c, s = F.quantize_nvfp4(x)
    want = F.dequantize_nvfp4(c, s)
    got = F.dequantize_triton("nvfp4", c, s)
    err = (got - want).abs().max().item()
    rows.append(("probe dequant_triton nvfp4 fp32", err, err == 0.0, float("nan")))
    got16 = F.dequantize_triton("nvfp4", c, s, f16_scaled=True).float() * F.F16_SHIFT
    err = (got16 - want).abs().max().item()
    rows.append(("probe dequant_triton nvfp4 f16_scaled", err, err == 0.0, float("nan")))


def _probe_subnormal_dot(rows: list) -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
        a = tl.load(a_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :])
        b = tl.load(b_ptr + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :])
        tl.store(c_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], tl.dot(a, b))

    for M, label in ((32, "mma.sync"), (64, "wgmma")):
        a = (torch.randn(M, 64, device="cuda") * 2.0 ** -16).half()  # mostly fp16 subnormals
        b = torch.randn(64, 16, device="cuda").half()
        c = torch.empty(M, 16, device="cuda")
        _dot[(1,)](a, b, c, M, 16, 64, num_warps=4)
        want = a.float() @ b.float()
        err = ((c - want).abs().max() / want.abs().max()).item()
        rows.append((f"probe fp16-subnormal tl.dot M={M} ({label}) rel", err, err < 1e-3, float("nan")))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from kernel_templates import nvfp4_attention as A
    from search_spaces import nvfp4_attention as S
    from tuner.timing import bench

    if not torch.cuda.is_available():
        print("needs a CUDA GPU (run with TRITON_INTERPRET unset)")
        return 2
    t_start = time.perf_counter()
    rows: list[tuple[str, float, bool, float]] = []

    def line(r: tuple[str, float, bool, float]) -> None:
        print(f"{r[0]:<72} err={r[1]:<11.4g} {'PASS' if r[2] else 'FAIL'} {r[3]:>9.1f} us", flush=True)

    for probe in (_probe_dequant, _probe_subnormal_dot):
        n = len(rows)
        try:
            probe(rows)
        except Exception as e:  # a probe that cannot compile is itself a finding
            rows.append((f"{probe.__name__} raised {type(e).__name__}: {str(e)[:60]}", float("nan"), False,
                         float("nan")))
        for r in rows[n:]:
            line(r)

    def run(tag: str, w: Any, inp: dict, ref: torch.Tensor, over: dict[str, Any], time_it: bool = True) -> None:
        cfg = dict(A.default_config(w), **over)
        name = (f"{tag} BN={cfg['BLOCK_N']} BH={cfg['BLOCK_H']} S={cfg['NUM_SPLITS']} DQ16={int(cfg['DQ_FP16'])} "
                f"SWAP={int(cfg['SWAP_AB'])} nw={cfg['num_warps']} ns={cfg['num_stages']}")
        try:
            out = A.launch(config=cfg, **inp)
            torch.cuda.synchronize()
            err = (out.float() - ref).abs().max().item()
            try:
                A.verify(out, ref, inp)
                ok = True
            except AssertionError:
                ok = False
            us = bench(lambda: A.launch(config=cfg, **inp), reps=args.reps, warmup=3).median_us if time_it else float("nan")
        except Exception as e:
            name += f" raised {type(e).__name__}: {str(e)[:50]}"
            err, ok, us = float("nan"), False, float("nan")
        rows.append((name, err, ok, us))
        line(rows[-1])

    kvs = [k for k in args.only.split(",") if k]
    # small ragged workloads: 20 heads (two head blocks at BLOCK_H=16, one masked at 32),
    # sequences shorter than the window, a partial page, several pages
    small: dict[tuple[str, str], tuple[Any, dict, torch.Tensor]] = {}
    for kv in kvs:
        for mode in ("dense", "sparse"):
            w = A.Workload(4, 2048, 20, kv, mode)
            inp = A.make_inputs(w, "cuda", 0)
            inp["seq_lens"] = torch.tensor([37, 300, 1000, 2048], dtype=torch.int32, device="cuda")
            if mode == "sparse":
                idx = inp["topk_idx"].clone()
                idx[0, 100:200] = -1
                idx[1, 5] = 1999  # beyond seq_len 300: skipped
                inp["topk_idx"] = idx
            small[(kv, mode)] = (w, inp, A.reference(**inp))

    plan: list[tuple[str, str, dict[str, Any]]] = []
    for kv in kvs:  # 1. the switches that change the code path, one small tile size
        dqs = (True, False) if kv == "nvfp4" else (False,)
        for dq in dqs:
            for swap in (True, False):
                plan.append((kv, "dense", dict(DQ_FP16=dq, SWAP_AB=swap, BLOCK_N=32, BLOCK_H=16, NUM_SPLITS=4)))
    for kv in kvs:  # 2. sparse
        for swap in (True, False):
            plan.append((kv, "sparse", dict(SWAP_AB=swap, BLOCK_N=32, BLOCK_H=16, NUM_SPLITS=2)))
    for kv in kvs:  # 3. tile shapes, head blocks, splits, warps (default switches)
        for bn in (16, 64):
            plan.append((kv, "dense", dict(BLOCK_N=bn, BLOCK_H=16, NUM_SPLITS=4)))
        plan.append((kv, "dense", dict(BLOCK_N=32, BLOCK_H=32, NUM_SPLITS=4)))
        plan.append((kv, "dense", dict(BLOCK_N=32, BLOCK_H=16, NUM_SPLITS=1)))
        plan.append((kv, "dense", dict(BLOCK_N=32, BLOCK_H=16, NUM_SPLITS=4, num_warps=4)))
        plan.append((kv, "dense", dict(BLOCK_N=64, BLOCK_H=16, NUM_SPLITS=4, num_warps=8, num_stages=1)))

    skipped = 0
    for kv, mode, over in plan:
        if time.perf_counter() - t_start > args.budget:
            skipped += 1
            continue
        w, inp, ref = small[(kv, mode)]
        run(f"small {kv:<5} {mode:<6}", w, inp, ref, over, time_it=False)

    # 4. the default grid's first points (B=16, N=32K, H=16 dense; sparse at 128K), timed
    for kv in kvs:
        for w in (A.Workload(16, 32768, 16, kv, "dense"), A.Workload(16, 131072, 16, kv, "sparse")):
            if time.perf_counter() - t_start > args.budget + 10:
                skipped += 1
                continue
            inp = A.make_inputs(w, "cuda", 0)
            ref = A.reference(**inp)
            floor_us = A.cost(w)[0] / 4.0e12 * 1e6  # at ~4 TB/s achievable HBM
            tag = f"grid {kv:<5} {w.mode:<6} B16 N{w.context // 1024}K (floor~{floor_us:.0f}us)"
            run(tag, w, inp, ref, {})
            if w.mode == "dense":
                alt = dict(BLOCK_N=32, num_warps=8) if A.default_config(w)["BLOCK_N"] != 32 else dict(BLOCK_N=64)
                if S.constraints(dict(A.default_config(w), **alt), w):
                    run(tag, w, inp, ref, alt)

    print(f"\n==== nvfp4_debug summary ({time.perf_counter() - t_start:.0f} s, {skipped} variants skipped "
          f"for the budget) ====")
    print(f"{'variant':<72} {'max|err|':<11} {'ok':<4} {'us':>9}")
    for r in rows:
        print(f"{r[0]:<72} {r[1]:<11.4g} {'PASS' if r[2] else 'FAIL':<4} {r[3]:>9.1f}")
    n_fail = sum(not r[2] for r in rows)
    print(f"{len(rows) - n_fail} passed, {n_fail} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
