"""GPU debug of the sparse MQA indexer: where do wrong top-k indices come from?

For each case the template runs with ``return_logits=True``; the indices must then be
exactly the top-k of the template's *own* logits (descending, lower index first on
ties), whatever the MMA's rounding. The same config runs without logits (a different
compile) and is compared the same way, and the logits' error against the float64
reference is printed (the FP8 tensor-core accumulation shows up there). Micro-kernels
check ``tl.histogram`` with a mask and ``tl.sort`` of int64 against torch.

    python benchmarks/sparse_mqa_debug.py
    python benchmarks/sparse_mqa_debug.py --phases [dsv32:1:8192 dsv41-flash:32:524288 ...]

``--phases``: for each ``profile:batch:context`` (next_n 1), the radix top-k and the default
each run once against the top-k of their own logits, then the launches of each path are
timed as growing prefixes (graph replay, L2 flushed, as the tuner times): the differences
are what each launch adds (scoring, each radix pass or the bound's launches, the ranking).
"""
from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import kernel_templates.sparse_mqa as M  # noqa: E402
from kernel_templates.sparse_mqa import launcher as L  # noqa: E402
from tuner.runtime.target import Target  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a smoke run under TRITON_INTERPRET=1
TARGET = Target.of(DEV)


@triton.jit
def _hist_kernel(x_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=-1)
    h = tl.histogram(((x >> 8) & 255).to(tl.int32), 256, mask=m & (x >= 0))
    tl.store(out_ptr + tl.arange(0, 256), h)


@triton.jit
def _sort_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.sort(tl.load(x_ptr + offs), descending=True))


@triton.jit
def _rcumsum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), 0, reverse=True))


def micro() -> None:
    for block in (256, 1024):
        x = torch.randint(0, 100, (block,), device=DEV, dtype=torch.int32)
        out = torch.empty_like(x)
        _rcumsum_kernel[(1,)](x, out, BLOCK=block, num_warps=4)
        ref = x.flip(0).cumsum(0).flip(0).int()
        print(f"reverse cumsum int32 BLOCK={block}: {'OK' if torch.equal(out, ref) else 'WRONG'}")
    for block, nw in ((1024, 4), (256, 4), (64, 4)):
        x = torch.randint(-5, 1 << 16, (block,), device=DEV, dtype=torch.int64)
        n = block - 37
        out = torch.empty(256, dtype=torch.int32, device=DEV)
        _hist_kernel[(1,)](x, n, out, BLOCK=block, num_warps=nw)
        v = x[:n]
        ref = torch.bincount(((v[v >= 0] >> 8) & 255), minlength=256).int()
        print(f"histogram BLOCK={block}: {'OK' if torch.equal(out, ref) else 'WRONG'} (sum {int(out.sum())} vs {int(ref.sum())})")
    for block in (512, 2048):
        x = torch.randint(0, 1 << 62, (block,), device=DEV, dtype=torch.int64)
        out = torch.empty_like(x)
        _sort_kernel[(1,)](x, out, BLOCK=block, num_warps=4)
        print(f"sort int64 BLOCK={block}: {'OK' if torch.equal(out, x.sort(descending=True).values) else 'WRONG'}")


def compare(tag: str, idx: torch.Tensor, want: torch.Tensor) -> None:
    idx, want = idx.reshape(want.shape).cpu(), want.cpu()
    bad = (idx != want).any(-1)
    nbad = int(bad.sum())
    rep = sum(int((r[r >= 0].unique().numel() != int((r >= 0).sum()))) for r in idx)
    sets = sum(int(set(idx[i].tolist()) == set(want[i].tolist())) for i in bad.nonzero().flatten().tolist())
    print(f"  {tag}: rows wrong {nbad}/{idx.shape[0]}, rows with repeats {rep}, wrong rows with the right set {sets}")


def case(profile: str, B: int, N: int, **over) -> None:
    w = M.Workload(B, N, 1, profile)
    cfg = dict(M.default_config(w, TARGET), **over)
    print(f"{profile} B={B} N={N} {over or 'default'} (S={cfg['NUM_SPLITS']})")
    t0 = time.time()
    inputs = M.make_inputs(w, DEV, 0)
    k = inputs["top_k"]
    idx, logits = M.launch(config=cfg, **dict(inputs, return_logits=True))
    want = M.topk_of_logits(logits.view(B, -1), k)
    compare("with logits vs own-logits top-k", idx, want)
    idx2 = M.launch(config=cfg, **inputs)
    compare("without logits vs own-logits top-k", idx2, want)
    # logits vs the float64 reference, sequence 0
    n = int(inputs["seq_lens"][0])
    ref = M.scores_at(inputs, 0, 0, torch.arange(n, device=DEV))
    err = (logits[0, 0, :n].double() - ref).abs().max() / ref.abs().max()
    print(f"  logits vs float64 (seq 0): max |err| / max |ref| = {float(err):.2e}  ({time.time() - t0:.1f}s)")


def phases(specs: list[str]) -> None:
    from tuner.timing import bench_kernel

    for spec in specs:
        prof, B, N = spec.split(":")
        w = M.Workload(int(B), int(N), 1, prof)
        inputs = M.make_inputs(w, DEV, 0)
        k = inputs["top_k"]
        for cfg in (M.radix_config(w, TARGET), M.default_config(w, TARGET)):
            algo = cfg["TOPK_ALGO"]
            idx, logits = M.launch(config=cfg, **dict(inputs, return_logits=True))
            bad = int((idx.view(w.batch, -1) != M.topk_of_logits(logits.view(w.batch, -1), k)).any(-1).sum())
            del idx, logits
            q = inputs["q"]
            max_len = inputs["block_table"].shape[1] * inputs["k_cache"].shape[1]
            bufs = L._buffers(w.batch, 1, max_len, k, False, cfg, q.device)
            plan = L._plan(q, inputs["weights"], inputs["k_cache"], inputs["k_scales"], inputs["block_table"],
                           inputs["seq_lens"], k, inputs["k_format"], False, cfg, bufs, TARGET)

            def run(n, plan=plan):
                for kern, grid, args in plan[:n]:
                    kern[grid](**args)
            times = [bench_kernel(M.SPEC, lambda n=n: run(n), reps=30).median_us for n in range(1, len(plan) + 1)]
            steps = [times[0]] + [b - a for a, b in zip(times, times[1:])]
            names = [kern.__name__.strip("_").replace("_kernel", "") for kern, _, _ in plan]
            print(f"{prof} B={B} N={N} {algo}: rows wrong vs own logits {bad}; total {times[-1]:.1f} us, "
                  f"scoring {times[0]:.1f} us, top-k +{100 * (times[-1] / times[0] - 1):.0f}%  "
                  f"launches {len(plan)}: " + " ".join(f"{n}:{t:.1f}" for n, t in zip(names, steps)), flush=True)
            del bufs, plan
        del inputs
        if DEV == "cuda":
            torch.cuda.empty_cache()


def main() -> None:
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__.strip())
        return
    if "--phases" in sys.argv:
        specs = [a for a in sys.argv[1:] if not a.startswith("--")]
        phases(specs or ["dsv32:1:8192", "dsv32:32:524288", "dsv41-flash:1:524288", "dsv41-flash:32:131072"])
        return
    micro()
    cases = [("dsv32", 1, 8192, {}), ("dsv41-flash", 8, 131072, {}), ("dsv41-flash", 8, 131072, {"num_stages": 1}),
             ("dsv41-flash", 8, 131072, {"TOPK_ALGO": "bound", "BOUND_GROUP": 32}),
             ("dsv32", 1, 524288, {}), ("dsv41-flash", 1, 8192, {})]
    if DEV == "cpu":
        cases = [("dsv41-flash", 2, 4096, {"NUM_SPLITS": 2})]
    for prof, B, N, over in cases:
        try:
            case(prof, B, N, **over)
        except Exception:
            traceback.print_exc(limit=3)


if __name__ == "__main__":
    main()
