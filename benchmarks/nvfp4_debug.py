"""GPU debug sweep for the NVFP4 decode attention template: which variant computes what.

For a small ragged workload per kv_dtype and mode it runs the combinations of the
template's switches (DQ_FP16, SWAP_AB, BLOCK_N, BLOCK_H, NUM_SPLITS, num_warps) against
the fp32 reference and prints one line per variant: the variant, the max abs error,
pass / fail (``verify``) and the time in us (``tuner.timing.bench``). Probes come first:
the dequant helpers alone, ``tl.dot`` on fp16 subnormals (DQ_FP16 feeds 2^-14-scaled,
mostly subnormal fp16 to the MMA), and a decoded NVFP4 tile fed straight into ``tl.dot``
in both operand roles (the join/reshape layouts of the hot loop), and the attention
kernel's word-wise fp16 decode against the nvfp4 module's (bit for bit). Then the
default config and the previous defaults (BLOCK_N=32 / 16 heads / 8 warps, and
BLOCK_N=64 / SWAP_AB / 4 warps before it) at the first points of the default grid, timed;
at H=64 also the 64-head default against 32 heads per program.

Compiles dominate the run time, so variants are ordered by how much they tell and the
sweep stops starting new ones after ``--budget`` seconds (default 75); the table printed
last lists every line again.

    python benchmarks/nvfp4_debug.py [--budget 75] [--only nvfp4]
    python benchmarks/nvfp4_debug.py --variants --budget 110   # only the target-point variant sweep
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

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kernel_templates import nvfp4 as F  # noqa: E402
from kernel_templates.nvfp4_attention import _nvfp4_tile_to_f16_words  # noqa: E402

DEV = "cuda"


@triton.jit
def _dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(c_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], tl.dot(a, b))


@triton.jit
def _dq_dot(c_ptr, s_ptr, q_ptr, o_ptr, BN: tl.constexpr, D: tl.constexpr, DQ16: tl.constexpr, SWAP: tl.constexpr):
    r = tl.arange(0, BN)
    codes = tl.load(c_ptr + r[:, None] * (D // 2) + tl.arange(0, D // 2)[None, :])
    scales = tl.load(s_ptr + r[:, None] * (D // 16) + tl.arange(0, D // 16)[None, :])
    q = tl.load(q_ptr + tl.arange(0, 16)[:, None] * D + tl.arange(0, D)[None, :])
    if DQ16:
        kv = F.nvfp4_tile_to_f16_scaled(codes, scales)
        q = q.to(tl.float16)
    else:
        kv = F.nvfp4_tile_to_f32(codes, scales).to(tl.bfloat16)
    if SWAP:  # [BN, 16]
        o = tl.dot(kv, tl.trans(q))
        tl.store(o_ptr + r[:, None] * 16 + tl.arange(0, 16)[None, :], o)
    else:  # [16, BN], stored transposed
        o = tl.dot(q, tl.trans(kv))
        tl.store(o_ptr + r[None, :] * 16 + tl.arange(0, 16)[:, None], o)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", type=float, default=75.0, help="seconds after which no new variant is started")
    p.add_argument("--only", default="nvfp4,fp8,bf16", help="comma-separated kv dtypes")
    p.add_argument("--reps", type=int, default=20, help="timed repetitions per variant")
    p.add_argument("--variants", action="store_true",
                   help="only the variant sweep at the issue's target points (B=16, N=32K: H=16 nvfp4 and fp8, "
                        "H=64 nvfp4): the default against SWAP_AB / D_CHUNKS / warps variants, each verified")
    return p.parse_args(argv)


def _probe_dequant(rows: list) -> None:
    import torch

    x = torch.randn(4096, 512, device=DEV)
    c, s = F.quantize_nvfp4(x)
    want = F.dequantize_nvfp4(c, s)
    got = F.dequantize_triton("nvfp4", c, s)
    err = (got - want).abs().max().item()
    rows.append(("probe dequant_triton nvfp4 fp32", err, err == 0.0, float("nan")))
    got16 = F.dequantize_triton("nvfp4", c, s, f16_scaled=True).float() * F.F16_SHIFT
    err = (got16 - want).abs().max().item()
    rows.append(("probe dequant_triton nvfp4 f16_scaled", err, err == 0.0, float("nan")))


@triton.jit
def _dec_words(c_ptr, s_ptr, o_ptr, o2_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    codes = tl.load(c_ptr + r[:, None] * C + tl.arange(0, C)[None, :])
    sc = tl.load(s_ptr + r[:, None] * (C // 8) + tl.arange(0, C // 8)[None, :])
    tl.store(o_ptr + r[:, None] * 2 * C + tl.arange(0, 2 * C)[None, :], _nvfp4_tile_to_f16_words(codes, sc))
    tl.store(o2_ptr + r[:, None] * 2 * C + tl.arange(0, 2 * C)[None, :], F.nvfp4_tile_to_f16_scaled(codes, sc))


def _probe_word_decode(rows: list) -> None:
    """The attention's fp16 decode (two elements per 32-bit word) vs the module's, bit for bit."""
    import torch
    c, s = F.quantize_nvfp4(torch.randn(64, 512, device=DEV) * 3.0)
    o = torch.empty(64, 512, dtype=torch.float16, device=DEV)
    o2 = torch.empty_like(o)
    _dec_words[(1,)](c, s, o, o2, 64, 256, num_warps=8)
    bad = (o.view(torch.int16) != o2.view(torch.int16)).sum().item()
    rows.append(("probe word-wise f16 decode == nvfp4_tile_to_f16_scaled (bad elems)", float(bad), bad == 0,
                 float("nan")))


def _probe_subnormal_dot(rows: list) -> None:
    import torch
    for M, label in ((32, "mma.sync"), (64, "wgmma")):
        a = (torch.randn(M, 64, device=DEV) * 2.0 ** -16).half()  # mostly fp16 subnormals
        b = torch.randn(64, 16, device=DEV).half()
        c = torch.empty(M, 16, device=DEV)
        _dot[(1,)](a, b, c, M, 16, 64, num_warps=4)
        want = a.float() @ b.float()
        err = ((c - want).abs().max() / want.abs().max()).item()
        rows.append((f"probe fp16-subnormal tl.dot M={M} ({label}) rel", err, err < 1e-3, float("nan")))


def _probe_dequant_dot(rows: list) -> None:
    """The attention's hot pattern alone: an NVFP4 tile decoded in registers (join/reshape
    of nibbles, block-scale reshape) fed straight into ``tl.dot``, both operand roles."""
    import torch
    for bn in (32, 64):
        c, s = F.quantize_nvfp4(torch.randn(bn, 512, device=DEV))
        q = torch.randn(16, 512, device=DEV).to(torch.bfloat16)
        for dq16 in (True, False):
            for swap in (True, False):
                o = torch.empty(bn, 16, device=DEV)
                _dq_dot[(1,)](c, s, q, o, bn, 512, dq16, swap, num_warps=4)
                kvf = F.dequantize_nvfp4(c, s) * (2.0 ** -14 if dq16 else 1.0)
                qf = q.half().float() if dq16 else q.float()
                want = kvf @ qf.t()
                err = ((o - want).abs().max() / want.abs().max()).item()
                rows.append((f"probe dequant->dot BN={bn} DQ16={int(dq16)} SWAP={int(swap)} rel", err, err < 1e-3,
                             float("nan")))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from kernel_templates import nvfp4_attention as A
    from search_spaces import nvfp4_attention as S
    from tuner.timing import bench_kernel

    if not torch.cuda.is_available():
        print("needs a CUDA GPU (run with TRITON_INTERPRET unset)")
        return 2
    t_start = time.perf_counter()
    rows: list[tuple[str, float, bool, float]] = []

    def line(r: tuple[str, float, bool, float]) -> None:
        print(f"{r[0]:<80} err={r[1]:<11.4g} {'PASS' if r[2] else 'FAIL'} {r[3]:>9.1f} us", flush=True)

    def run(tag: str, w: Any, inp: dict, ref: torch.Tensor, over: dict[str, Any], time_it: bool = True) -> None:
        cfg = dict(A.default_config(w), **over)
        name = (f"{tag} BN={cfg['BLOCK_N']} BH={cfg['BLOCK_H']} S={cfg['NUM_SPLITS']} DQ16={int(cfg['DQ_FP16'])} "
                f"SWAP={int(cfg['SWAP_AB'])} CH={cfg['D_CHUNKS']} nw={cfg['num_warps']} ns={cfg['num_stages']}")
        try:
            out = A.launch(config=cfg, **inp)
            torch.cuda.synchronize()
            err = (out.float() - ref).abs().max().item()
            try:
                A.verify(out, ref, inp)
                ok = True
            except AssertionError:
                ok = False
            us = float("nan")
            if time_it:  # as the tuner times trials: graph replay, L2 flushed before each call
                us = bench_kernel(A.SPEC, lambda: A.launch(config=cfg, **inp), reps=args.reps, warmup=3).median_us
        except Exception as e:
            name += f" raised {type(e).__name__}: {str(e)[:50]}"
            err, ok, us = float("nan"), False, float("nan")
        rows.append((name, err, ok, us))
        line(rows[-1])

    if args.variants:
        _variant_sweep(args, run, t_start)
        print(f"\n==== nvfp4_debug --variants summary ({time.perf_counter() - t_start:.0f} s) ====")
        for r in rows:
            print(f"{r[0]:<80} {r[1]:<11.4g} {'PASS' if r[2] else 'FAIL':<4} {r[3]:>9.1f}")
        return 0

    for probe in (_probe_dequant, _probe_word_decode, _probe_subnormal_dot, _probe_dequant_dot):
        n = len(rows)
        try:
            probe(rows)
        except Exception as e:  # a probe that cannot compile is itself a finding
            rows.append((f"{probe.__name__} raised {type(e).__name__}: {str(e)[:60]}", float("nan"), False,
                         float("nan")))
        for r in rows[n:]:
            line(r)

    kvs = [k for k in args.only.split(",") if k]
    # small ragged workloads: 20 heads (two head blocks at BLOCK_H=16, one masked at 32),
    # sequences shorter than the window, a partial page, several pages
    small: dict[tuple[str, str], tuple[Any, dict, torch.Tensor]] = {}
    for kv in kvs:
        for mode in ("dense", "sparse"):
            w = A.Workload(4, 2048, 20, kv, mode)
            inp = A.make_inputs(w, "cuda", 0)
            inp["seq_lens"] = torch.tensor([37, 300, 1000, 2048], dtype=torch.int32, device=DEV)
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
        plan.append((kv, "dense", dict(BLOCK_N=64, BLOCK_H=32, NUM_SPLITS=4)))  # the H=20 default
        plan.append((kv, "dense", dict(BLOCK_N=64, BLOCK_H=64, NUM_SPLITS=4)))  # the H=64 default (wgmma)
        plan.append((kv, "dense", dict(BLOCK_N=64, BLOCK_H=16, NUM_SPLITS=4, SWAP_AB=True)))

    skipped = 0
    for kv, mode, over in plan:
        if time.perf_counter() - t_start > args.budget:
            skipped += 1
            continue
        w, inp, ref = small[(kv, mode)]
        run(f"small {kv:<5} {mode:<6}", w, inp, ref, over, time_it=False)

    # 4. the default grid's first points (B=16, N=32K, H=16 dense; sparse at 128K; H=64), timed,
    # the default against the previous defaults
    previous = (dict(BLOCK_N=32, BLOCK_H=16, num_warps=8, num_stages=2),   # until the decode-once pipeline
                dict(BLOCK_N=64, BLOCK_H=16, SWAP_AB=True, num_warps=4))  # before that
    for kv in kvs:
        for w in (A.Workload(16, 32768, 16, kv, "dense"), A.Workload(16, 131072, 16, kv, "sparse"),
                  A.Workload(16, 32768, 64, kv, "dense")):
            if time.perf_counter() - t_start > args.budget + 10:
                skipped += 1
                continue
            inp = A.make_inputs(w, "cuda", 0)
            ref = A.reference(**inp)
            floor_us = A.cost(w)[0] / 4.0e12 * 1e6  # at ~4 TB/s achievable HBM
            tag = f"grid {kv:<5} {w.mode:<6} B16 N{w.context // 1024}K H{w.heads} (floor~{floor_us:.0f}us)"
            run(tag, w, inp, ref, {})
            if w.mode == "dense" and w.heads == 16:
                for alt in previous:
                    alt = dict(alt, NUM_SPLITS=A.default_splits(w, alt["BLOCK_H"], alt["BLOCK_N"]))
                    if S.constraints(dict(A.default_config(w), **alt), w):
                        run(tag, w, inp, ref, alt)
            elif w.mode == "dense":
                alt = dict(BLOCK_H=32, NUM_SPLITS=A.default_splits(w, 32, 64))
                run(tag, w, inp, ref, alt)

    print(f"\n==== nvfp4_debug summary ({time.perf_counter() - t_start:.0f} s, {skipped} variants skipped "
          f"for the budget) ====")
    print(f"{'variant':<72} {'max|err|':<11} {'ok':<4} {'us':>9}")
    for r in rows:
        print(f"{r[0]:<72} {r[1]:<11.4g} {'PASS' if r[2] else 'FAIL':<4} {r[3]:>9.1f}")
    n_fail = sum(not r[2] for r in rows)
    print(f"{len(rows) - n_fail} passed, {n_fail} failed")
    return 0


# variants timed at the target points: (label, overrides); NUM_SPLITS follows default_splits
VARIANTS_H16 = (
    ("default", {}),
    ("swap 4w", dict(SWAP_AB=True, num_warps=4)),
    ("swap 8w", dict(SWAP_AB=True, num_warps=8)),
    ("swap 8w ch2", dict(SWAP_AB=True, num_warps=8, D_CHUNKS=2)),
    ("swap 4w ch2", dict(SWAP_AB=True, num_warps=4, D_CHUNKS=2)),
    ("swap 4w ch4", dict(SWAP_AB=True, num_warps=4, D_CHUNKS=4)),
    ("mma.sync 8w ch2", dict(D_CHUNKS=2)),
    ("swap 8w BN128", dict(SWAP_AB=True, num_warps=8, BLOCK_N=128)),
)
VARIANTS_H64 = (
    ("default", {}),
    ("ch4", dict(D_CHUNKS=4)),
    ("ch2", dict(D_CHUNKS=2)),
    ("BH32", dict(BLOCK_H=32)),
    ("BH32 ch2", dict(BLOCK_H=32, D_CHUNKS=2)),
)


def _variant_sweep(args: argparse.Namespace, run: Any, t_start: float) -> None:
    """Each variant verified against the fp32 reference and timed (graph replay, L2 flushed
    as in the tuner: ``tuner.timing.bench``), nvfp4 H=16 first, then fp8 H=16, nvfp4 H=64;
    no new variant starts after ``--budget`` seconds."""
    import torch

    from kernel_templates import nvfp4_attention as A
    from search_spaces import nvfp4_attention as S

    points = [("nvfp4", 16, VARIANTS_H16), ("fp8", 16, VARIANTS_H16[:4]), ("nvfp4", 64, VARIANTS_H64)]
    for kv, heads, variants in points:
        w = A.Workload(16, 32768, heads, kv, "dense")
        inp = A.make_inputs(w, "cuda", 0)
        ref = A.reference(**inp)
        floor_us = A.cost(w)[0] / 4.0e12 * 1e6
        for label, over in variants:
            if time.perf_counter() - t_start > args.budget:
                print(f"skipped (budget): {kv} H{heads} {label}")
                continue
            cfg = dict(A.default_config(w), **over)
            if over.get("DQ_FP16") is None and kv != "nvfp4":
                cfg["DQ_FP16"] = False
            cfg["NUM_SPLITS"] = A.default_splits(w, cfg["BLOCK_H"], cfg["BLOCK_N"])
            if not S.constraints(cfg, w):
                print(f"pruned by the constraints: {kv} H{heads} {label}")
                continue
            run(f"{label:<16} {kv:<5} B16 N32K H{heads} (floor~{floor_us:.0f}us)", w, inp, ref, cfg)
        del inp, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
