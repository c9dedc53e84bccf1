"""How far below the tuned MoE routing kernel can any routing kernel go? A ladder of
minimal kernels, each timed exactly as the benchmark times the routing kernel (CUDA-graph
replay of back-to-back calls, L2 warm: the router GEMM has just written the logits).

    python benchmarks/moe_floor_ladder.py [--tokens 1,16,64,256] [--profiles dsv3,dsv41-flash] [--pack DIR]

Issue 2 asks for the routing kernel within 2x of an empty launch up to T = 256. Each rung
adds one thing every routing kernel must do, with nothing else:

1. ``empty``: an empty kernel (the floor itself).
2. ``touch``: one program loads token 0's logits and stores one value (a dependent load and
   a store: the least a kernel that reads its input and writes its output does).
3. ``topk``: one program per token: score, bias, top-k by k arg-max rounds, weights
   renormalised, ids and weights stored (no groups, no layout).
4. ``fill``: the align outputs' fixed cost alone, ``sorted_token_ids`` (``T*k + E*(BM-1)``
   entries) set to the pad value by 8 programs and ``expert_ids`` to -1, no compute.
5. ``topk+fill``: rungs 3 and 4 in one launch (programs past T only fill).
6. the tuned routing kernel (pack config, else the default) with the full align layout.

A rung's time over the empty launch says how much of the 2x budget that step alone
spends. Every rung's outputs are checked (ids and weights of ``topk`` against the
reference's ungrouped top-k, the fill values) before it is timed. Prints a table last;
raw numbers go to ``--out`` as JSON.
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

from _results import save_raw  # noqa: E402


@triton.jit
def touch(logits_ptr, out_ptr, E: tl.constexpr, EP: tl.constexpr):
    e = tl.arange(0, EP)
    tl.store(out_ptr, tl.max(tl.load(logits_ptr + e, mask=e < E, other=float("-inf")), 0))


@triton.jit
def _topk_row(logits_ptr, bias_ptr, ids_ptr, w_ptr, t, E: tl.constexpr, EP: tl.constexpr, K: tl.constexpr,
              KP: tl.constexpr, SQRTSOFTPLUS: tl.constexpr, RENORM: tl.constexpr, scaling):
    e = tl.arange(0, EP)
    x = tl.load(logits_ptr + t * E + e, mask=e < E, other=0.0).to(tl.float32)
    if SQRTSOFTPLUS:
        s0 = tl.sqrt(tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x))))
    else:
        s0 = 1.0 / (1.0 + tl.exp(-x))
    s = tl.where(e < E, s0 + tl.load(bias_ptr + e, mask=e < E, other=0.0), float("-inf"))
    slot = tl.arange(0, KP)
    ids = tl.zeros([KP], tl.int32)
    ws = tl.zeros([KP], tl.float32)
    for j in tl.static_range(K):
        m = tl.max(s, 0)
        i = tl.min(tl.where(s == m, e, E), 0)  # lower index wins a tie
        ids = tl.where(slot == j, i, ids)
        ws = tl.where(slot == j, tl.sum(tl.where(e == i, s0, 0.0), 0), ws)
        s = tl.where(e == i, float("-inf"), s)
    if RENORM:
        ws = ws / tl.sum(ws, 0)
    ws = ws * scaling
    tl.store(ids_ptr + t * K + slot, ids, mask=slot < K)
    tl.store(w_ptr + t * K + slot, ws, mask=slot < K)


@triton.jit
def _fill(sorted_ptr, expert_ptr, n_sorted, n_blocks, pad, pid, FILL_PROGRAMS: tl.constexpr,
          BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    for s in range(pid * BLOCK, n_sorted, FILL_PROGRAMS * BLOCK):
        tl.store(sorted_ptr + s + o, tl.full([BLOCK], pad, tl.int32), mask=s + o < n_sorted)
    for s in range(pid * BLOCK, n_blocks, FILL_PROGRAMS * BLOCK):
        tl.store(expert_ptr + s + o, tl.full([BLOCK], -1, tl.int32), mask=s + o < n_blocks)


@triton.jit
def topk(logits_ptr, bias_ptr, ids_ptr, w_ptr, scaling, E: tl.constexpr, EP: tl.constexpr, K: tl.constexpr,
         KP: tl.constexpr, SQRTSOFTPLUS: tl.constexpr, RENORM: tl.constexpr):
    _topk_row(logits_ptr, bias_ptr, ids_ptr, w_ptr, tl.program_id(0), E, EP, K, KP, SQRTSOFTPLUS, RENORM, scaling)


@triton.jit
def fill(sorted_ptr, expert_ptr, n_sorted, n_blocks, pad, FILL_PROGRAMS: tl.constexpr, BLOCK: tl.constexpr):
    _fill(sorted_ptr, expert_ptr, n_sorted, n_blocks, pad, tl.program_id(0), FILL_PROGRAMS, BLOCK)


@triton.jit
def topk_fill(logits_ptr, bias_ptr, ids_ptr, w_ptr, sorted_ptr, expert_ptr, T, n_sorted, n_blocks, pad,
              scaling, E: tl.constexpr, EP: tl.constexpr, K: tl.constexpr, KP: tl.constexpr,
              SQRTSOFTPLUS: tl.constexpr, RENORM: tl.constexpr, FILL_PROGRAMS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid < T:
        _topk_row(logits_ptr, bias_ptr, ids_ptr, w_ptr, pid, E, EP, K, KP, SQRTSOFTPLUS, RENORM, scaling)
    else:
        _fill(sorted_ptr, expert_ptr, n_sorted, n_blocks, pad, pid - T, FILL_PROGRAMS, BLOCK)


def _kernels() -> dict[str, Any]:
    return {"touch": touch, "topk": topk, "fill": fill, "topk_fill": topk_fill}


FILL_PROGRAMS, FILL_BLOCK = 8, 1024


def ladder(tokens: int, profile: str, device: str, config: dict[str, Any] | None = None,
           time_fn: Any = None) -> dict[str, Any]:
    """Build, check and (with ``time_fn``) time every rung for one workload. ``time_fn(fn)``
    returns microseconds; without it the rungs are only checked (the interpreter test)."""
    import torch

    from kernel_templates import moe_routing as mr
    from tuner.runtime.target import Target

    K_ = _kernels()
    wl = mr.Workload(tokens, profile)
    inp = mr.make_inputs(wl, device, seed=0)
    logits, bias, k = inp["logits"], inp["bias"], inp["top_k"]
    T, E = logits.shape
    bm = inp["block_m"]
    n_sorted, pad = T * k + E * (bm - 1), T * k
    n_blocks = -(-n_sorted // bm)
    sp = inp["scoring"] == "sqrtsoftplus"
    kp, ep = max(2, 1 << (k - 1).bit_length()), 1 << (E - 1).bit_length()
    renorm = bool(inp["renormalize"])
    kw = dict(E=E, EP=ep, K=k, KP=kp, SQRTSOFTPLUS=sp, RENORM=renorm)
    ids = torch.empty(T, k, dtype=torch.int32, device=device)
    w = torch.empty(T, k, dtype=torch.float32, device=device)
    sorted_ids = torch.empty(n_sorted, dtype=torch.int32, device=device)
    expert_ids = torch.empty(n_blocks, dtype=torch.int32, device=device)
    one = torch.empty(1, dtype=torch.float32, device=device)
    scaling = float(inp["routed_scaling_factor"])

    rungs = {
        "touch": lambda: K_["touch"][(1,)](logits, one, E=E, EP=ep),
        "topk": lambda: K_["topk"][(T,)](logits, bias, ids, w, scaling, **kw),
        "fill": lambda: K_["fill"][(FILL_PROGRAMS,)](sorted_ids, expert_ids, n_sorted, n_blocks, pad,
                                                     FILL_PROGRAMS=FILL_PROGRAMS, BLOCK=FILL_BLOCK),
        "topk+fill": lambda: K_["topk_fill"][(T + FILL_PROGRAMS,)](
            logits, bias, ids, w, sorted_ids, expert_ids, T, n_sorted, n_blocks, pad, scaling, **kw,
            FILL_PROGRAMS=FILL_PROGRAMS, BLOCK=FILL_BLOCK),
    }
    # the ungrouped top-k of the reference's math, for the checks
    x = logits.float()
    s0 = torch.sqrt(torch.where(x > 20, x, torch.nn.functional.softplus(x))) if sp else torch.sigmoid(x)
    s = s0 + bias
    order = torch.sort(s, dim=1, descending=True, stable=True).indices[:, :k]
    out: dict[str, Any] = {"tokens": T, "profile": profile, "n_sorted": n_sorted}
    for name, fn in rungs.items():
        ids.fill_(-7)
        w.zero_()
        sorted_ids.fill_(-7)
        expert_ids.fill_(-7)
        fn()
        if name == "touch":
            assert torch.allclose(one.cpu(), logits[0].float().max().cpu().reshape(1))
        if "topk" in name:
            # the same experts up to near-ties (the GPU's exp / division differ from torch's in
            # the last bits, as moe_routing.verify allows): the chosen scores equal the
            # reference's k largest, and the weights are those of the chosen experts
            got = ids.long()
            assert bool(((got >= 0) & (got < E)).all()), f"{name}: ids out of range"
            assert torch.allclose(s.gather(1, got).cpu(), s.gather(1, order).cpu(), rtol=1e-6, atol=0), \
                f"{name}: ids differ beyond near-ties"
            own = s0.gather(1, got)
            own = (own / own.sum(1, keepdim=True) if renorm else own) * scaling
            assert torch.allclose(w.cpu(), own.cpu(), rtol=1e-5, atol=1e-6), f"{name}: weights differ"
        if "fill" in name:
            assert bool((sorted_ids == pad).all()) and bool((expert_ids == -1).all()), f"{name}: fill"
        if time_fn is not None:
            out[name] = time_fn(fn)
    if time_fn is not None:
        cfg = config or mr.default_config(wl, Target.of(device))
        mr.verify(mr.launch(config=cfg, **inp), mr.reference(**inp), inp)
        out["routing"] = time_fn(lambda: mr.launch(config=cfg, **inp))
        out["config"] = cfg
    return out


RUNGS = ("touch", "topk", "fill", "topk+fill", "routing")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=lambda s: [int(x) for x in s.split(",")], default=[1, 16, 64, 256])
    p.add_argument("--profiles", type=lambda s: s.split(","), default=["dsv3", "dsv41-flash"])
    p.add_argument("--pack", type=Path, default=None, help="a kernel pack: time the routing kernel with its config")
    p.add_argument("--out", type=Path, default=None, help="folder for the raw JSON")
    args = p.parse_args(argv)
    from tuner import timing

    if not timing.gpu_available():
        print("moe_floor_ladder.py needs a CUDA GPU", file=sys.stderr)
        return 2
    from tuner import runtime

    pack = runtime.load_pack(args.pack) if args.pack else None

    def time_fn(fn: Any) -> float:
        return timing.bench(fn, graph=True, flush_l2=False).median_us

    empty = timing.empty_launch_floor(graph=True).median_us
    rows = []
    for profile in args.profiles:
        for T in args.tokens:
            sel = pack.select("moe_routing", {"tokens": T, "profile": profile}) if pack else None
            cfg = sel.config if sel is not None and sel.how != "default" else None
            rows.append(ladder(T, profile, "cuda", cfg, time_fn))
            print(f"T={T} {profile}: " + ", ".join(f"{r} {rows[-1][r]:.2f}" for r in RUNGS), flush=True)
    result = {"empty_us": empty, "rows": rows}
    if args.out:
        save_raw(args.out, "moe_floor_ladder", result)
    print(f"empty launch (graph replay): {empty:.2f} us; 2x = {2 * empty:.2f} us; each rung in us (x empty)")
    print(f"{'T':>5} {'profile':<12} " + " ".join(f"{r:>14}" for r in RUNGS))
    for r in rows:
        print(f"{r['tokens']:>5} {r['profile']:<12} " + " ".join(f"{r[x]:>7.2f} ({r[x] / empty:4.1f}x)" for x in RUNGS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
