"""How little can a top-k add to the sparse MQA scoring at short contexts? A ladder of
minimal second launches after the scoring kernel, each timed the way the benchmark times
the indexer (CUDA-graph replay of back-to-back calls, ``bench_kernel``).

    python benchmarks/sparse_topk_ladder.py [--contexts 8192,32768] [--profiles dsv32,dsv41-flash]
                                            [--batch 1] [--pack DIR] [--out DIR]

The budget asks for the top-k to add no more than 30% on top of scoring alone. At 8K keys
and one sequence the scoring alone is a few microseconds, so the budget is one or two.
Each rung is "scoring alone" (``top_k=0, return_logits=True``: the logits written) plus
one launch that does a part of what every top-k must do after the scores exist, with
nothing else:

1. ``+empty``: an empty kernel (a dependent launch alone; the one the empty-launch floor times).
2. ``+touch``: one program per row reads every visible score of the row and writes
   ``top_k`` int32 indices (the least a top-k launch reads and writes).
3. ``+sort``: one program per row ranks ``top_k`` scores (the row's first ``top_k``, as
   if the selection were free): 63-bit keys as the template builds them, ``tl.sort``, the
   indices written (the least the required descending order costs once the k keys are
   known).
4. the tuned ``mqa_topk`` call (pack config, else the default).

A one-launch design (the last scoring program does the top-k) saves the launch but not
the rest: it still reads the row and orders k keys, in one program, after every score
exists. Every rung's output is checked before it is timed. Prints a table last; raw
numbers go to ``--out`` as JSON.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # benchmarks/_results.py (benchmarks is not a package)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kernel_templates.sparse_mqa.common import _key_index, _order_key  # noqa: E402
from tuner._empty import launch_empty  # noqa: E402

from _results import save_raw  # noqa: E402


@triton.jit
def touch(logits_ptr, idx_ptr, n, stride_l, K: tl.constexpr, CHUNK: tl.constexpr, KP: tl.constexpr):
    row = tl.program_id(0)
    o = tl.arange(0, CHUNK)
    m = tl.full([CHUNK], float("-inf"), tl.float32)
    for s in range(0, n, CHUNK):
        m = tl.maximum(m, tl.load(logits_ptr + row * stride_l + s + o, mask=s + o < n, other=float("-inf")))
    j = tl.arange(0, KP)
    # the indices 0..K-1, made to depend on every score read (never true: no score is +inf)
    tl.store(idx_ptr + row * K + j, j + (tl.max(m, 0) == float("inf")).to(tl.int32), mask=j < K)


@triton.jit
def sort_k(logits_ptr, idx_ptr, stride_l, K: tl.constexpr, KP: tl.constexpr):
    row = tl.program_id(0)
    j = tl.arange(0, KP)
    s = tl.load(logits_ptr + row * stride_l + j, mask=j < K, other=float("-inf"))
    keys = tl.where(j < K, _order_key(s, j), -1)
    keys = tl.sort(keys, descending=True)
    tl.store(idx_ptr + row * K + j, _key_index(keys), mask=j < K)


RUNGS = ("+empty", "+touch", "+sort", "tuned")


def ladder(batch: int, context: int, profile: str, device: str, config: dict[str, Any] | None = None,
           time_fn: Any = None) -> dict[str, Any]:
    """Build, check and (with ``time_fn``) time every rung for one workload. ``time_fn(fn)``
    returns microseconds; without it the rungs are only checked (the interpreter test)."""
    import torch

    from kernel_templates import sparse_mqa as M
    from tuner.runtime.target import Target

    w = M.Workload(batch=batch, context=context, next_n=1, profile=profile)
    inp = M.make_inputs(w, device, 0)
    K = int(inp["top_k"])
    kp = triton.next_power_of_2(K)
    cfg = config or M.default_config(w, Target.of(device))
    score_only = dict(inp, top_k=0, return_logits=True)
    _, logits = M.launch(config=cfg, **score_only)
    rows = logits.reshape(-1, logits.shape[-1])
    n = int(inp["seq_lens"].max())
    idx = torch.empty(rows.shape[0], K, dtype=torch.int32, device=device)
    chunk = min(4096, triton.next_power_of_2(n))

    def score() -> Any:
        return M.launch(config=cfg, **score_only)

    rungs = {
        "+empty": lambda: launch_empty(idx),
        "+touch": lambda: touch[(rows.shape[0],)](rows, idx, n, rows.stride(0), K=K, CHUNK=chunk, KP=kp),
        "+sort": lambda: sort_k[(rows.shape[0],)](rows, idx, rows.stride(0), K=K, KP=kp),
    }
    out: dict[str, Any] = {"batch": batch, "context": context, "profile": profile, "top_k": K, "config": cfg}
    for name, fn in rungs.items():
        idx.fill_(-7)
        fn()
        if name == "+touch":
            assert torch.equal(idx.cpu(), torch.arange(K, dtype=torch.int32).expand(rows.shape[0], K)), name
        if name == "+sort":
            want = M.topk_of_logits(rows[:, :K], K)
            assert torch.equal(idx.cpu(), want.cpu()), name
    if time_fn is not None:
        out["score"] = time_fn(score)
        for name, fn in rungs.items():
            out[name] = time_fn(lambda fn=fn: (score(), fn()))
        M.verify(M.launch(config=cfg, **inp), M.reference(**inp), inp)
        out["tuned"] = time_fn(lambda: M.launch(config=cfg, **inp))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--contexts", type=lambda s: [int(x) for x in s.split(",")], default=[8192, 32768])
    p.add_argument("--profiles", type=lambda s: s.split(","), default=["dsv32", "dsv41-flash"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--pack", type=Path, default=None, help="a kernel pack: the indexer's config from it")
    p.add_argument("--out", type=Path, default=None, help="folder for the raw JSON")
    args = p.parse_args(argv)
    from tuner import timing

    if not timing.gpu_available():
        print("sparse_topk_ladder.py needs a CUDA GPU", file=sys.stderr)
        return 2
    from kernel_templates import sparse_mqa as M
    from tuner import runtime

    pack = runtime.load_pack(args.pack) if args.pack else None

    def time_fn(fn: Any) -> float:
        return timing.bench_kernel(M.SPEC, fn).median_us

    empty_us = timing.empty_launch_floor(graph=True).median_us
    rows = []
    for profile in args.profiles:
        for ctx in args.contexts:
            axes = {"batch": args.batch, "context": ctx, "next_n": 1, "profile": profile}
            sel = pack.select("sparse_mqa", axes) if pack else None
            cfg = sel.config if sel is not None and sel.how != "default" else None
            r = ladder(args.batch, ctx, profile, "cuda", cfg, time_fn)
            rows.append(r)
            print(f"B={args.batch} {ctx} {profile}: score {r['score']:.2f}, "
                  + ", ".join(f"{x} {r[x]:.2f}" for x in RUNGS), flush=True)
    result = {"empty_us": empty_us, "rows": rows}
    if args.out:
        save_raw(args.out, "sparse_topk_ladder", result)
    print(f"empty launch (graph replay): {empty_us:.2f} us. Each rung: us of scoring + that launch "
          "(+% over scoring alone); 30% = the target's budget")
    print(f"{'B':>3} {'context':>8} {'profile':<12} {'score':>7} " + " ".join(f"{r:>15}" for r in RUNGS))
    for r in rows:
        print(f"{r['batch']:>3} {r['context']:>8} {r['profile']:<12} {r['score']:>7.2f} "
              + " ".join(f"{r[x]:>7.2f} ({100 * (r[x] / r['score'] - 1):+4.0f}%)" for x in RUNGS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
