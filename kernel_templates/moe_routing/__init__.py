"""Fused MoE routing: router logits -> top-k experts, weights and the expert-sorted layout.

The kernels do scoring, group-limited top-k (``topk``), weights and
``moe_align_block_size`` (the padded, expert-sorted token layout grouped GEMMs read).
``chunked``: with ``FUSED`` ONE launch, the programs meeting at a grid barrier (an arrive
counter in a cached scratch word, reset by the last program to leave, so no memset launch
is needed); without it, the same kernel runs as two launches (PHASE 1 then PHASE 2).
``direct``: a fused config whose tokens fit one chunk routes them all in one program and
lays them out from registers. The interpreter runs programs one after another, so a grid
barrier with more than one program would deadlock there: it takes the two-launch path then.
This module: the public API (``moe_routing``), the launcher, ``SPEC``; ``reference`` holds
the PyTorch reference.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import torch

from kernel_templates._host import cdiv, next_power_of_2
from kernel_templates.moe_routing.chunked import (PREFIX_MIN_PROGRAMS, _meta, _moe_prefix_kernel, _moe_routing_kernel,
                                                  _prefix_meta, _sync_scratch)
from kernel_templates.moe_routing.direct import DIRECT_MAX_TOKENS, _direct_meta, _moe_direct_kernel, is_direct
from kernel_templates.moe_routing.reference import (SCORINGS, MoeRouting, _scores, _stable_topk_desc, reference,
                                                    reference_align)
from tuner import runtime
from tuner.runtime.target import Target
from tuner.spec import KernelSpec
from tuner.verify import assert_close, assert_equal

BLOCK_MS = (16, 32, 64, 128)

PROFILES: dict[str, dict[str, Any]] = {
    "dsv3": dict(num_experts=256, n_group=8, topk_group=4, top_k=8, scoring="sigmoid",
                 routed_scaling_factor=2.5, renormalize=True),
    "dsv4-flash": dict(num_experts=256, n_group=1, topk_group=1, top_k=6, scoring="sqrtsoftplus",
                       routed_scaling_factor=1.5, renormalize=True),
    "dsv41-flash": dict(num_experts=384, n_group=1, topk_group=1, top_k=6, scoring="sqrtsoftplus",
                        routed_scaling_factor=1.5, renormalize=True),
}
_PROFILE_BY_KEY = {(p["num_experts"], p["top_k"], p["n_group"], p["topk_group"], p["scoring"],
                    float(p["routed_scaling_factor"])): name for name, p in PROFILES.items()}


# ----------------------------------------------------------------------------- launcher

def grid_programs(tokens: int, config: dict[str, Any], sms: int | None = None) -> tuple[int, int]:
    """(programs, chunks per program) the launcher uses for ``tokens`` under ``config``."""
    if is_direct(tokens, config):
        return config["MAX_PROGRAMS"], 1
    chunks = max(1, cdiv(tokens, config["BLOCK_T"]))
    np_ = min(config["MAX_PROGRAMS"], chunks)
    if config["FUSED"] and sms is not None:
        np_ = min(np_, sms)  # the grid barrier needs every program resident at once
    cpp = cdiv(chunks, np_)
    return cdiv(chunks, cpp), cpp


def _check_args(logits: torch.Tensor, bias: torch.Tensor | None, top_k: int, n_group: int, topk_group: int,
                scoring: str, block_m: int, expert_map: torch.Tensor | None) -> None:
    for name, t in (("logits", logits), ("bias", bias), ("expert_map", expert_map)):
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor or None, got {type(t).__name__}")
    if logits.dim() != 2:
        raise ValueError(f"logits must be [T, E], got shape {tuple(logits.shape)}")
    if logits.dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"logits must be float32 or bfloat16, got {logits.dtype}")
    T, E = logits.shape
    if E < 1:
        raise ValueError("logits needs at least one expert column")
    if logits.stride(1) != 1:
        raise ValueError("logits must be contiguous along the expert dimension")
    if bias is not None and (bias.shape != (E,) or bias.dtype != torch.float32 or bias.device != logits.device):
        raise ValueError(f"bias must be float32 [E={E}] on {logits.device}, got {bias.dtype} "
                         f"{tuple(bias.shape)} on {bias.device}")
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
    if n_group < 1 or E % n_group:
        raise ValueError(f"n_group={n_group} must divide the {E} experts")
    if not 1 <= topk_group <= n_group:
        raise ValueError(f"topk_group={topk_group} must be in [1, n_group={n_group}]")
    if n_group > 1 and bias is not None and E // n_group < 2:
        raise ValueError("the top-2 group score needs at least 2 experts per group")
    if not 1 <= top_k <= topk_group * (E // n_group):
        raise ValueError(f"top_k={top_k} must be in [1, experts in the kept groups = {topk_group * (E // n_group)}]")
    if block_m not in BLOCK_MS:
        raise ValueError(f"block_m must be one of {BLOCK_MS}, got {block_m}")
    if expert_map is not None and (expert_map.shape != (E,) or expert_map.dtype != torch.int32
                                   or expert_map.device != logits.device):
        raise ValueError(f"expert_map must be int32 [E={E}] on {logits.device}, got {expert_map.dtype} "
                         f"{tuple(expert_map.shape)} on {expert_map.device}")


CONFIG_KEYS = ("BLOCK_T", "MAX_PROGRAMS", "FUSED", "num_warps", "num_stages")


def _check_config(config: dict[str, Any]) -> None:
    """ValueError naming the first knob of ``config`` missing or of the wrong type or range."""
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        raise ValueError(f"config lacks {missing} (keys: {list(CONFIG_KEYS)})")
    for k, hi in (("BLOCK_T", 1024), ("num_warps", 32)):
        v = config[k]
        if type(v) is not int or not 1 <= v <= hi or v & (v - 1):
            raise ValueError(f"{k} must be a power of two in [1, {hi}], got {v!r}")
    if type(config["MAX_PROGRAMS"]) is not int or not 1 <= config["MAX_PROGRAMS"] <= 65536:
        raise ValueError(f"MAX_PROGRAMS must be an int in [1, 65536] (the grid cap), got {config['MAX_PROGRAMS']!r}")
    if not isinstance(config["FUSED"], bool):
        raise ValueError(f"FUSED must be a bool, got {config['FUSED']!r}")
    if type(config["num_stages"]) is not int or not 1 <= config["num_stages"] <= 8:
        raise ValueError(f"num_stages must be an int in [1, 8], got {config['num_stages']!r}")


def launch(*, config: dict[str, Any], logits: torch.Tensor, bias: torch.Tensor | None, top_k: int,
           n_group: int = 1, topk_group: int = 1, scoring: str = "sigmoid", routed_scaling_factor: float = 1.0,
           renormalize: bool = True, block_m: int = 64, expert_map: torch.Tensor | None = None) -> MoeRouting:
    """Validate, allocate and launch: one launch when FUSED and it can be (the direct kernel when
    the tokens fit one chunk), else two (three when the two-launch grid has more than
    PREFIX_MIN_PROGRAMS programs: the prefix scan between)."""
    _check_args(logits, bias, top_k, n_group, topk_group, scoring, block_m, expert_map)
    _check_config(config)
    T, E = logits.shape
    dev = logits.device
    n = T * top_k
    n_sorted = n + E * (block_m - 1)
    max_blocks = cdiv(n_sorted, block_m)
    w = torch.empty(T, top_k, dtype=torch.float32, device=dev)
    ids = torch.empty(T, top_k, dtype=torch.int32, device=dev)
    # whole 4-word groups underneath, so the direct kernel's fills are 16-byte stores to the end
    sorted_ids = torch.empty(cdiv(n_sorted, 4) * 4, dtype=torch.int32, device=dev)[:n_sorted]
    eids = torch.empty(cdiv(max_blocks, 4) * 4, dtype=torch.int32, device=dev)[:max_blocks]
    npad = torch.empty(1, dtype=torch.int32, device=dev)
    target = Target.of(dev)
    # the interpreter runs programs one after another: no residency cap, and no grid barrier below
    np_, cpp = grid_programs(T, config, None if target.interpret else target.sms)
    if is_direct(T, config):
        _moe_direct_kernel[(np_,)](
            logits, bias if bias is not None else w, expert_map if expert_map is not None else ids,
            w, ids, sorted_ids, eids, npad, T, E, logits.stride(0), n_sorted, max_blocks, block_m,
            float(routed_scaling_factor), TOP_K=top_k, N_GROUP=n_group, TOPK_GROUP=topk_group, SCORING=scoring,
            HAS_BIAS=bias is not None, RENORM=bool(renormalize), HAS_MAP=expert_map is not None,
            BLOCK_T=config["BLOCK_T"], num_warps=config["num_warps"], num_stages=config["num_stages"],
            **_direct_meta(E, top_k, n_group, config["BLOCK_T"]))
        return MoeRouting(w, ids, sorted_ids, eids, npad)
    cnt = torch.empty(np_, E, dtype=torch.int32, device=dev)
    cur = torch.empty(np_, E, dtype=torch.int32, device=dev)
    fused = config["FUSED"] and not (target.interpret and np_ > 1)
    prefix = not fused and np_ > PREFIX_MIN_PROGRAMS
    tot = torch.empty(E if prefix else 1, dtype=torch.int32, device=dev)
    args = (logits, bias if bias is not None else w, expert_map if expert_map is not None else ids,
            w, ids, sorted_ids, eids, npad, cnt, cur, _sync_scratch(dev), tot,
            T, E, logits.stride(0), n_sorted, max_blocks, block_m, cpp, float(routed_scaling_factor))
    meta = dict(TOP_K=top_k, N_GROUP=n_group, TOPK_GROUP=topk_group, SCORING=scoring,
                HAS_BIAS=bias is not None, RENORM=bool(renormalize), HAS_MAP=expert_map is not None,
                BLOCK_T=config["BLOCK_T"], MAX_PROGRAMS=config["MAX_PROGRAMS"],
                num_warps=config["num_warps"], num_stages=config["num_stages"], **_meta(E, top_k, n_group, config["BLOCK_T"]))
    for phase in ((0,) if fused else (1, 2)):
        if phase == 2 and prefix:
            pm = _prefix_meta(np_, E)
            _moe_prefix_kernel[(cdiv(E, pm["BLOCK_E"]),)](cnt, cur, tot, np_, E, **pm, num_warps=4)
        _moe_routing_kernel[(np_,)](*args, PHASE=phase, FUSED=fused, GRID_SYNC=fused and np_ > 1,
                                    PREFIX=prefix and phase == 2, **meta)
    return MoeRouting(w, ids, sorted_ids, eids, npad)


# ----------------------------------------------------------------------------- public API

def profile_of(num_experts: int, top_k: int, n_group: int, topk_group: int, scoring: str,
               routed_scaling_factor: float) -> str:
    """The PROFILES name these routing arguments match, else ``"custom"``."""
    return _PROFILE_BY_KEY.get((num_experts, top_k, n_group, topk_group, scoring, float(routed_scaling_factor)),
                               "custom")


def moe_routing(logits: torch.Tensor, bias: torch.Tensor | None, *, top_k: int, n_group: int = 1,
                topk_group: int = 1, scoring: str = "sigmoid", routed_scaling_factor: float = 1.0,
                renormalize: bool = True, block_m: int = 64, expert_map: torch.Tensor | None = None,
                config: dict[str, Any] | None = None) -> MoeRouting:
    """Route tokens to experts and lay them out for the grouped GEMM, in one launch.

    ``config=None`` takes the tuned config for (tokens, profile) from the active pack, or
    the default. Ties between equal scores go to the lower expert (and group) index.
    """
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"logits must be a torch.Tensor [T, E], got {type(logits).__name__}")
    if logits.dim() != 2:
        raise ValueError(f"logits must be [T, E], got shape {tuple(logits.shape)}")
    if config is None:
        prof = profile_of(logits.shape[-1], top_k, n_group, topk_group, scoring, routed_scaling_factor)
        config = runtime.select("moe_routing", {"tokens": int(logits.shape[0]), "profile": prof},
                                Target.of(logits.device)).config
    return launch(config=config, logits=logits, bias=bias, top_k=top_k, n_group=n_group, topk_group=topk_group,
                  scoring=scoring, routed_scaling_factor=routed_scaling_factor, renormalize=renormalize,
                  block_m=block_m, expert_map=expert_map)


# ----------------------------------------------------------------------------- workloads

@dataclass(frozen=True)
class Workload:
    """One routing shape: number of tokens and a model profile (PROFILES or "custom")."""

    tokens: int
    profile: str


def _profile(workload: Workload) -> dict[str, Any]:
    try:
        return PROFILES[workload.profile]
    except KeyError:
        raise ValueError(f"unknown moe_routing profile {workload.profile!r} (known: {', '.join(PROFILES)})") from None


def make_inputs(workload: Workload, device: str = "cpu", seed: int = 0) -> dict[str, Any]:
    """Router GEMM output (fp32 logits) and a skewed correction bias, as a profile sees."""
    p = _profile(workload)
    E = p["num_experts"]
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(workload.tokens, E, generator=g)
    # Uneven expert loads: a few hot experts get a larger bias.
    skew = 0.3 * torch.rand(E, generator=g) ** 4
    bias = 0.1 * torch.randn(E, generator=g) + skew
    return dict(logits=logits.to(device), bias=bias.to(device), top_k=p["top_k"], n_group=p["n_group"],
                topk_group=p["topk_group"], scoring=p["scoring"],
                routed_scaling_factor=p["routed_scaling_factor"], renormalize=p["renormalize"],
                block_m=64, expert_map=None)


def default_config(workload: Workload, target: Target) -> dict[str, Any]:
    """H200 heuristic (from the phase profile, ``benchmarks/moe_profile.py``): up to DIRECT_MAX_TOKENS
    the direct kernel with a warp per token (every top-k reduction a warp shuffle, one
    CTA-wide step for the layout; sm_90 compile check: no bar.sync before the layout step,
    48-80 registers up to T=8, no spills), 7 more programs sharing the padding fill; then many one-token programs while T <= 128
    (per-token latency, not throughput, is what a small T costs); beyond, chunks grow so
    that <= 128 programs share the tokens, all resident for the single-launch grid barrier;
    from T = 2048 two launches of up to 1024 programs."""
    E = PROFILES.get(workload.profile, {}).get("num_experts", 512)
    e_pad = next_power_of_2(E)
    T = max(1, workload.tokens)
    if T <= DIRECT_MAX_TOKENS:
        bt = next_power_of_2(T)
        return dict(BLOCK_T=bt, MAX_PROGRAMS=8, FUSED=True, num_warps=min(8, bt), num_stages=1)
    cap = 16 if e_pad <= 256 else 8  # keeps the [BLOCK_T, E_PAD] tiles at <= 32 values a thread
    bt = min(cap, next_power_of_2(cdiv(T, 128)))
    cfg = dict(BLOCK_T=bt, MAX_PROGRAMS=min(128, next_power_of_2(cdiv(T, bt))), FUSED=True,
               num_warps=4 if bt * e_pad >= 2048 else 2, num_stages=1)
    if T >= 2048:
        # Two launches around the prefix scan, up to 1024 programs of small chunks: the
        # H200 winners at T = 4096 / 8192 (dsv41-flash 72.4 -> 30.4 us and 126.5 ->
        # 51.2 us, dsv3 T=8192 109.6 -> 45.3 us against the 128-program fused default).
        bt = 2 if e_pad > 256 else 8
        cfg.update(BLOCK_T=bt, MAX_PROGRAMS=min(1024, next_power_of_2(cdiv(T, bt))), FUSED=False,
                   num_warps=4)
    if target.interpret and grid_programs(T, cfg)[0] > 1:
        cfg["FUSED"] = False  # the interpreter runs programs sequentially: no grid barrier
    return cfg


def cost(workload: Workload) -> tuple[float, float]:
    """Fewest bytes (logits, bias, outputs, one re-read of topk_ids) and rough flops."""
    p = _profile(workload)
    T, E, k = workload.tokens, p["num_experts"], p["top_k"]
    n_sorted = T * k + E * 63
    out = T * k * 8 + n_sorted * 4 + cdiv(n_sorted, 64) * 4 + 4
    return float(T * E * 4 + E * 4 + out + T * k * 4), float(T * E * (12 + 3 * k))


_TIE_RTOL = 1e-6


def _near_equal(s_row: torch.Tensor, ids: torch.Tensor, want: torch.Tensor) -> bool:
    """Same ids slot by slot, or ids whose scores differ by at most a near-tie."""
    a, b = s_row[ids.long()], s_row[want.long()]
    return bool(((ids == want) | ((a - b).abs() <= _TIE_RTOL * torch.maximum(a.abs(), b.abs()))).all())


def _group_tie_alternatives(s_row: torch.Tensor, has_bias: bool, n_group: int, topk_group: int,
                            top_k: int) -> list[torch.Tensor]:
    """Reference top-k ids for every choice among groups near-tied at the keep boundary."""
    if n_group <= 1:
        return []
    g = s_row.view(n_group, -1)
    gs = g.sort(dim=-1, descending=True).values[:, :2].sum(-1) if has_bias else g.amax(-1)
    boundary = gs.sort(descending=True).values[topk_group - 1]
    band = _TIE_RTOL * boundary.abs().clamp(min=1e-30)
    sure = (gs > boundary + band).nonzero().flatten().tolist()
    tied = ((gs - boundary).abs() <= band).nonzero().flatten().tolist()
    alts = []
    for combo in itertools.combinations(tied, topk_group - len(sure)):
        keep = torch.zeros(n_group, dtype=torch.bool)
        keep[sure + list(combo)] = True
        masked = s_row.masked_fill(~keep.repeat_interleave(g.shape[1]), float("-inf"))
        alts.append(_stable_topk_desc(masked, top_k).to(torch.int32))
    return alts


def verify(out: MoeRouting, ref: MoeRouting, inputs: dict[str, Any]) -> None:
    """ids as the reference up to near-ties (1e-6 relative), weights of the kernel's own ids,
    and the align triple exactly as ``reference_align`` of the kernel's own ids."""
    out, ref = MoeRouting(*out), MoeRouting(*ref)
    logits, bias = inputs["logits"], inputs["bias"]
    E = logits.shape[1]
    ids, rids = out.topk_ids.cpu(), ref.topk_ids.cpu()
    if ids.shape != rids.shape or ids.dtype != torch.int32:
        raise AssertionError(f"topk_ids: got {ids.dtype} {tuple(ids.shape)}, want int32 {tuple(rids.shape)}")
    if ((ids < 0) | (ids >= E)).any():
        raise AssertionError("topk_ids: expert id out of range")
    s0 = _scores(logits.cpu(), inputs["scoring"])
    s = s0 + bias.cpu().float() if bias is not None else s0
    for t in (ids != rids).any(dim=1).nonzero().flatten().tolist():
        # A row may differ only where scores are near-tied: between experts, or between
        # groups at the keep boundary (a 1-ulp difference in a score can flip either).
        alts = [rids[t]] + _group_tie_alternatives(s[t], bias is not None, inputs["n_group"], inputs["topk_group"],
                                                   inputs["top_k"])
        if not any(_near_equal(s[t], ids[t], alt) for alt in alts):
            j = int((ids[t] != rids[t]).nonzero()[0, 0])
            raise AssertionError(f"topk_ids: token {t} differs beyond near-ties at slot {j}: "
                                 f"got {ids[t, j].item()} want {rids[t, j].item()}")
    if (ids.sort(dim=1).values[:, 1:] == ids.sort(dim=1).values[:, :-1]).any():
        raise AssertionError("topk_ids: an expert chosen twice for one token")
    w = s0.gather(1, ids.long())
    if inputs["renormalize"]:
        w = w / w.sum(dim=-1, keepdim=True)
    w = w * inputs["routed_scaling_factor"]
    if out.topk_weights.dtype != torch.float32:
        raise AssertionError(f"topk_weights: dtype {out.topk_weights.dtype}, want float32")
    assert_close("topk_weights", out.topk_weights.cpu(), w, atol=1e-5, rtol=1e-5)
    emap = inputs.get("expert_map")
    want = reference_align(ids, E, inputs["block_m"], emap.cpu() if emap is not None else None)
    for name, o, r in zip(("sorted_token_ids", "expert_ids", "num_tokens_post_pad"), out[2:], want):
        assert_equal(name, o.cpu(), r)


# ----------------------------------------------------------------------------- baselines

def _torch_eager(logits: torch.Tensor, bias: torch.Tensor | None, *, top_k: int, n_group: int = 1,
                 topk_group: int = 1, scoring: str = "sigmoid", routed_scaling_factor: float = 1.0,
                 renormalize: bool = True, block_m: int = 64, expert_map: torch.Tensor | None = None) -> MoeRouting:
    """vLLM-style grouped_topk then a torch moe_align_block_size: what engines run natively."""
    scores = _scores(logits, scoring)
    T, E = scores.shape
    s = scores + bias.unsqueeze(0) if bias is not None else scores
    if n_group > 1:
        g = s.view(T, n_group, -1)
        gscore = g.topk(2, dim=-1)[0].sum(dim=-1) if bias is not None else g.amax(dim=-1)
        gidx = torch.topk(gscore, k=topk_group, dim=-1, sorted=False)[1]
        gmask = torch.zeros_like(gscore).scatter_(1, gidx, 1)
        smask = gmask.unsqueeze(-1).expand(T, n_group, E // n_group).reshape(T, E)
        s = s.masked_fill(~smask.bool(), float("-inf"))
    ids = torch.topk(s, k=top_k, dim=-1, sorted=True)[1]  # sorted: the slot order the kernel and verify use
    w = scores.gather(1, ids)
    if renormalize:
        w = w / w.sum(dim=-1, keepdim=True)
    ids = ids.to(torch.int32)
    return MoeRouting(w * routed_scaling_factor, ids, *reference_align(ids, E, block_m, expert_map))


baselines = {"torch_eager": _torch_eager}


# ----------------------------------------------------------------------------- lowering

def lower_signatures(workload: Workload, config: dict[str, Any],
                     target: Target | None = None) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    """Each launch ``launch`` does on ``target`` (None: an sm_90 GPU) for this workload/config:
    (jit fn, signature, constexprs).

    Needs ``TRITON_INTERPRET`` unset (the interpreter wraps the kernel in a non-compilable object).
    """
    p = _profile(workload)
    E, k = p["num_experts"], p["top_k"]
    fused = bool(config["FUSED"])  # GPU lowering: the interpreter's two-launch fallback does not apply
    sig = {"logits_ptr": "*fp32", "bias_ptr": "*fp32", "emap_ptr": "*i32", "w_ptr": "*fp32", "ids_ptr": "*i32",
           "sorted_ptr": "*i32", "eids_ptr": "*i32", "npad_ptr": "*i32", "cnt_ptr": "*i32", "cur_ptr": "*i32",
           "sync_ptr": "*i32", "tot_ptr": "*i32", "T": "i32", "E": "i32", "stride_lt": "i32", "n_sorted": "i32",
           "max_blocks": "i32",
           "block_m": "i32", "chunks_per_prog": "i32", "scaling": "fp32"}
    base = dict(TOP_K=k, N_GROUP=p["n_group"], TOPK_GROUP=p["topk_group"], SCORING=p["scoring"], HAS_BIAS=True,
                RENORM=p["renormalize"], HAS_MAP=False, BLOCK_T=config["BLOCK_T"])
    if is_direct(workload.tokens, config):
        dsig = {name: t for name, t in sig.items()
                if name not in ("cnt_ptr", "cur_ptr", "sync_ptr", "tot_ptr", "chunks_per_prog")}
        dx = dict(base, **_direct_meta(E, k, p["n_group"], config["BLOCK_T"]))
        return [(_moe_direct_kernel, {**dsig, **{name: "constexpr" for name in dx}}, dx)]
    cx = dict(base, MAX_PROGRAMS=config["MAX_PROGRAMS"], **_meta(E, k, p["n_group"], config["BLOCK_T"]))
    np_ = grid_programs(workload.tokens, config, (target or Target.named("sm_90")).sms)[0]
    prefix = not fused and np_ > PREFIX_MIN_PROGRAMS
    out = []
    for phase in ((0,) if fused else (1, 2)):
        if phase == 2 and prefix:
            pc = dict(_prefix_meta(np_, E))  # a copy: the cached dict is shared
            psig = {"cnt_ptr": "*i32", "before_ptr": "*i32", "tot_ptr": "*i32", "NP": "i32", "E": "i32"}
            out.append((_moe_prefix_kernel, {**psig, **{name: "constexpr" for name in pc}}, pc))
        c = dict(cx, PHASE=phase, FUSED=fused, GRID_SYNC=fused and np_ > 1, PREFIX=prefix and phase == 2)
        out.append((_moe_routing_kernel, {**sig, **{name: "constexpr" for name in c}}, c))
    return out


runtime.register_defaults("moe_routing", lambda wd, target: default_config(Workload(**wd), target))
runtime.register_check("moe_routing", _check_config)

SPEC = KernelSpec(
    name="moe_routing", workload=Workload, make_inputs=make_inputs, reference=reference, launch=launch,
    default_config=default_config, cost=cost, verify=verify, baselines=baselines, launch_bound=True,
    cold_l2=False,
    description="router logits -> grouped top-k, weights and moe_align_block_size layout, one launch",
)
