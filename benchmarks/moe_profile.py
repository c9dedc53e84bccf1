"""Where the fused MoE routing kernel spends its time (GPU): phase 1 alone, phase 2 alone,
the fused launch, and the group stage left out, across configs. Times under graph replay.

    python3 benchmarks/moe_profile.py --out DIR
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton

import kernel_templates.moe_routing as mr
from kernel_templates.moe_routing import chunked
from tuner import timing
from tuner.runtime.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/_results.py (benchmarks is not a package)
from _results import write_raw  # noqa: E402


def phase_launcher(cfg, inputs, phases, n_group_override=None):
    logits, bias, top_k = inputs["logits"], inputs["bias"], inputs["top_k"]
    T, E = logits.shape
    dev = logits.device
    n_sorted = T * top_k + E * (inputs["block_m"] - 1)
    max_blocks = triton.cdiv(n_sorted, inputs["block_m"])
    w = torch.empty(T, top_k, dtype=torch.float32, device=dev)
    ids = torch.empty(T, top_k, dtype=torch.int32, device=dev)
    srt = torch.empty(n_sorted, dtype=torch.int32, device=dev)
    eids = torch.empty(max_blocks, dtype=torch.int32, device=dev)
    npad = torch.empty(1, dtype=torch.int32, device=dev)
    np_, cpp = mr.grid_programs(T, cfg, Target.of(dev).sms)
    cnt = torch.zeros(np_, E, dtype=torch.int32, device=dev)
    cur = torch.empty(np_, E, dtype=torch.int32, device=dev)
    ng = n_group_override or inputs["n_group"]
    args = (logits, bias, ids, w, ids, srt, eids, npad, cnt, cur, chunked._sync_scratch(dev),
            T, E, logits.stride(0), n_sorted, max_blocks, inputs["block_m"], cpp, 1.0)
    meta = dict(TOP_K=top_k, N_GROUP=ng, TOPK_GROUP=min(inputs["topk_group"], ng), SCORING=inputs["scoring"],
                HAS_BIAS=True, RENORM=True, HAS_MAP=False, BLOCK_T=cfg["BLOCK_T"], MAX_PROGRAMS=cfg["MAX_PROGRAMS"],
                num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], **chunked._meta(E, top_k, ng, cfg["BLOCK_T"]))

    def run():
        for ph, fused in phases:
            chunked._moe_routing_kernel[(np_,)](*args, PHASE=ph, FUSED=fused, GRID_SYNC=fused and np_ > 1, **meta)
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="benchmarks/results/raw")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("moe_profile needs a GPU")
    rows = []
    for prof in ("dsv3", "dsv41-flash"):
        for T in (1, 16, 256, 4096):
            w = mr.Workload(T, prof)
            inputs = mr.make_inputs(w, "cuda", 0)
            d = mr.default_config(w, Target.of("cuda"))
            cfgs = [d] + [dict(d, num_warps=nw) for nw in (1, 2, 8) if nw != d["num_warps"]]
            if T >= 16:
                cfgs += [dict(d, BLOCK_T=bt, MAX_PROGRAMS=min(128, triton.next_power_of_2(triton.cdiv(T, bt))))
                         for bt in (1, 2, 8) if bt != d["BLOCK_T"]]
            for cfg in cfgs:
                r = {"profile": prof, "T": T, "config": cfg}
                for name, phases, ng in (("fused", [(0, True)], None), ("two", [(1, False), (2, False)], None),
                                         ("p1", [(1, False)], None), ("p2", [(2, False)], None),
                                         ("p1_nogroup", [(1, False)], 1)):
                    if ng and prof != "dsv3":
                        continue
                    try:
                        fn = phase_launcher(cfg, inputs, phases, ng)
                        fn()
                        torch.cuda.synchronize()
                        r[name] = timing.bench_kernel(mr.SPEC, fn).median_us
                    except Exception as e:  # noqa: BLE001
                        r[name] = f"{type(e).__name__}"
                rows.append(r)
                print(f"{prof:12} T={T:5} bt={cfg['BLOCK_T']:2} np={cfg['MAX_PROGRAMS']:3} nw={cfg['num_warps']} "
                      + " ".join(f"{k}={r[k]:.1f}" if isinstance(r.get(k), float) else f"{k}={r.get(k)}"
                                 for k in ("fused", "two", "p1", "p2", "p1_nogroup") if k in r), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    write_raw(Path(args.out) / "moe_profile.json", rows)


if __name__ == "__main__":
    main()
