"""The launcher: validate, allocate, plan the launches of a config (scoring kernel, then the
config's top-k path) for a ``Target``, run them."""
from __future__ import annotations

import logging
from typing import Any

import torch

from kernel_templates._gluon import TensorDescriptor, gl
from kernel_templates._host import cdiv, check_knobs, check_paged, next_power_of_2
from kernel_templates.sparse_mqa.bound import (_bound_place_kernel, _bound_threshold_kernel, _bound_topk_kernel,
                                               bound_gmax_block, bound_parts, bound_select_cap)
from kernel_templates.sparse_mqa.common import (_CNT_C1, _CNT_C1X, _CNT_C2, _CNT_C3, _CNT_C4, _CNT_C5, _CNT_TIE, _RS,
                                                D_INDEX, K_FORMATS, MAX_TOPK, RADIX_FIRST, RADIX_LEAD, TOPK_ALGOS)
from kernel_templates.sparse_mqa.scoring import _score_kernel
from kernel_templates.sparse_mqa.scoring_gluon import GL_SCORE_BLOCK_N, _gl_score_kernel, score_gluon_error
from kernel_templates.sparse_mqa.topk import (_radix_merge_rank_kernel, _radix_pass_kernel, _radix_place_kernel,
                                              _row_topk_kernel)
from tuner.runtime.target import Target

log = logging.getLogger(__name__)
_LOGGED: set[str] = set()  # one-time notices already logged

ROW_WARPS = 8  # row top-k program: sm_90 107-128 registers, no stack; at 4 warps 255 (Triton 3.6)
_TIE_MAX = 4096  # more keys tied at the k-th score than this: one program selects them (slow, exact)
_FMT = {"fp8": 0, "mxfp4": 1}
# kernels that, with LAUNCH_PDL, start as programmatic dependent launches (each calls _pdl_enter before it
# reads what an earlier launch wrote)
_PDL_KERNELS = ("_radix_pass_kernel", "_radix_place_kernel", "_radix_merge_rank_kernel", "_bound_threshold_kernel",
                "_bound_topk_kernel", "_bound_place_kernel")


def _check(name: str, t: Any, shape: tuple, dtypes: tuple[torch.dtype, ...]) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name} must be {' or '.join(str(d) for d in dtypes)}, got {t.dtype}")
    if len(shape) != t.dim() or any(s is not None and s != ts for s, ts in zip(shape, t.shape)):
        want = ", ".join("?" if s is None else str(s) for s in shape)
        raise ValueError(f"{name} must have shape [{want}], got {list(t.shape)}")
    if t.numel() and t.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dimension")


def _validate(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format) -> None:
    if k_format not in K_FORMATS:
        raise ValueError(f"k_format must be one of {K_FORMATS}, got {k_format!r}")
    _check("q", q, (None, None, None, D_INDEX), (torch.float8_e4m3fn,))
    B, T, H, _ = q.shape
    if T < 1 or H < 1:
        raise ValueError(f"q needs next_n >= 1 and heads >= 1, got shape {list(q.shape)}")
    _check("weights", weights, (B, T, H), (torch.float32,))
    if k_format == "fp8":
        _check("k_cache", k_cache, (None, None, D_INDEX), (torch.float8_e4m3fn,))
        _check("k_scales", k_scales, tuple(k_cache.shape[:2]), (torch.float32,))
    else:
        _check("k_cache", k_cache, (None, None, D_INDEX // 2), (torch.uint8,))
        _check("k_scales", k_scales, (*k_cache.shape[:2], D_INDEX // 32), (torch.uint8,))
    page = k_cache.shape[1]
    if page < 16 or page & (page - 1):
        raise ValueError(f"page size {page} must be a power of two >= 16")
    _check("block_table", block_table, (B, None), (torch.int32,))
    _check("seq_lens", seq_lens, (B,), (torch.int32,))
    if not isinstance(top_k, int) or not 0 <= top_k <= MAX_TOPK:
        raise ValueError(f"top_k must be an int in [0, {MAX_TOPK}], got {top_k!r}")
    check_paged(block_table, seq_lens, k_cache.shape[0], page, clamp=True)  # the kernels clamp seq_lens


def _algo(config: dict[str, Any]) -> str:
    a = config["TOPK_ALGO"]
    if a not in TOPK_ALGOS:
        raise ValueError(f"TOPK_ALGO must be one of {TOPK_ALGOS}, got {a!r}")
    return a


def radix_sampled_launches(config: dict[str, Any]) -> bool:
    """The radix passes with the sampled first digit: where ``SCORE_SAMPLE`` (with the Gluon
    scoring kernel) applies."""
    return _algo(config) == "radix" and config["RADIX_FIRST"] == "sampled"


def radix_splits(config: dict[str, Any], max_len: int) -> int:
    """Programs per row of the radix passes: TOPK_SPLITS, at most one per TOPK_BLOCK keys."""
    return max(1, min(int(config["TOPK_SPLITS"]), cdiv(max_len, int(config["TOPK_BLOCK"]))))


def _plan(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format, return_logits, config, bufs,
          target: Target):
    """The launches as (kernel, grid, args) on ``target``; shared by ``launch`` and ``lower_signatures``.

    ``LAUNCH_PDL`` (sm_90+): the scoring kernel lets the next launch start early, and each
    top-k launch of ``_PDL_KERNELS`` after it starts as a programmatic dependent launch (its
    programs become resident while the previous launch finishes, and wait for it in
    ``_pdl_enter``), so the launch gaps between them shrink. Launches of other kernels keep
    the plain stream order. The bound path's launches read ``seq_lens`` (an input) before
    their wait: safe because ``plan[0]``, the scoring launch, is never itself a dependent
    launch, so every input is final before any launch of the call starts."""
    plan = _plan_launches(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format, return_logits,
                          config, bufs, target)
    if config["LAUNCH_PDL"] and target.cc >= 90 and not target.interpret and len(plan) > 1:
        plan[0][2]["PDL"] = True
        for kern, _grid, args in plan[1:]:
            if getattr(kern, "__name__", "") in _PDL_KERNELS:
                args.update(PDL=True, launch_pdl=True)
    return plan


def _score_launch(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format, return_logits, config,
                  bufs, target, algo):
    """The scoring launch: the Gluon kernel where ``SCORE_GLUON`` asks for it and it can score
    this call, else the Triton kernel."""
    B, T, H, D = q.shape
    page = k_cache.shape[1]
    BN, S = int(config["BLOCK_N"]), int(config["NUM_SPLITS"])
    if page % BN and BN % page:
        raise ValueError(f"BLOCK_N={BN} and the page size {page} must divide one another")
    if BN < 16:
        raise ValueError("BLOCK_N must be >= 16 (MMA tile)")
    if config["MX_FP8_DOT"] and k_format != "mxfp4":
        raise ValueError("MX_FP8_DOT applies to k_format='mxfp4' only")
    if config["MX_WORD_DECODE"] and not config["MX_FP8_DOT"]:
        raise ValueError("MX_WORD_DECODE applies to the MX_FP8_DOT path only")
    # The word decode loads a key's four scales as one 4-byte aligned word: scales viewed at
    # an unaligned offset or stride take the bytewise decode (the same values).
    word = bool(config["MX_WORD_DECODE"]) and not (k_scales.stride(0) % 4 or k_scales.stride(1) % 4
                                                   or k_scales.data_ptr() % 4)
    bound = algo == "bound"
    GB = int(config["BOUND_GROUP"])
    if bound and (GB < 1 or GB & (GB - 1) or BN % GB):
        raise ValueError(f"BOUND_GROUP must be a power of two dividing BLOCK_N={BN}, got {GB}")
    logits = bufs["logits"]
    max_len = block_table.shape[1] * page
    tp = next_power_of_2(T)
    hp = max(next_power_of_2(H), 16 // tp)  # >= 16 query rows: the MMA's N
    maxnreg = {"maxnreg": int(config["SCORE_MAXNREG"])} if config["SCORE_MAXNREG"] and not target.interpret else {}
    gluon = bool(config["SCORE_GLUON"])
    if gluon:
        # a performance choice: where the Gluon kernel cannot score this call, the Triton one does
        why = score_gluon_error(config, k_format, T, H, page, top_k, algo, target, return_logits,
                                k_cache.is_contiguous())
        if why:
            gluon = False
            if why not in _LOGGED:
                _LOGGED.add(why)
                log.info("%s; the Triton scoring kernel runs instead", why)
    if not gluon:
        kc = k_cache.view(torch.uint8)
        return (_score_kernel, (B, S), dict(
            q_ptr=q.view(torch.uint8), w_ptr=weights, k_ptr=kc, ks_ptr=k_scales, bt_ptr=block_table,
            seqlen_ptr=seq_lens, logits_ptr=logits, rs_ptr=bufs["rs"], gmax_ptr=bufs["gmax"], H=H, max_len=max_len,
            stride_qb=q.stride(0), stride_qt=q.stride(1), stride_qh=q.stride(2), stride_wb=weights.stride(0),
            stride_wt=weights.stride(1), stride_kp=kc.stride(0), stride_ks=kc.stride(1),
            stride_sp=k_scales.stride(0), stride_ss=k_scales.stride(1), stride_btb=block_table.stride(0),
            stride_lb=logits.stride(0), stride_lt=logits.stride(1), stride_gm=bufs["gmax"].stride(0),
            D=D, PAGE=page, K_FORMAT=_FMT[k_format], NEXT_N=T, TP=tp, HP=hp, BLOCK_N=BN, NUM_SPLITS=S,
            MX_FP8_DOT=bool(config["MX_FP8_DOT"]), MX_WORD_DECODE=word, TOPK_ALGO=algo,
            BOUND_GROUP=GB if bound else BN, INTERPRET=target.interpret, num_warps=int(config["num_warps"]),
            num_stages=int(config["num_stages"]), **maxnreg))
    # SCORE_SAMPLE: the Gluon scoring kernel histograms the sampled first digit itself (the rows'
    # state zero-filled by _buffers), so the radix passes start at the pick (one launch fewer)
    sample = algo == "radix" and radix_sampled_launches(config) and bool(config["SCORE_SAMPLE"])
    mx = k_format == "mxfp4"  # the code cache itself (cp.async), fp8 keys a TMA descriptor of their rows
    return (_gl_score_kernel, (B, S), dict(
        q_ptr=q, w_ptr=weights, k_src=k_cache if mx else TensorDescriptor.from_tensor(
            k_cache.view(-1, D), [GL_SCORE_BLOCK_N, D],
            gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2)),
        stride_kp=k_cache.stride(0), stride_ks=k_cache.stride(1),
        ks_ptr=k_scales, bt_ptr=block_table, seqlen_ptr=seq_lens, logits_ptr=logits, rs_ptr=bufs["rs"],
        gmax_ptr=bufs["gmax"], H=H, max_len=max_len, stride_qb=q.stride(0),
        stride_qh=q.stride(2), stride_wb=weights.stride(0), stride_sp=k_scales.stride(0),
        stride_ss=k_scales.stride(1), stride_btb=block_table.stride(0), stride_lb=logits.stride(0),
        stride_gm=bufs["gmax"].stride(0), HP=hp, PAGE=page, NUM_SPLITS=S, STAGES=int(config["num_stages"]),
        ZERO_RS=algo in ("radix", "bound") and not sample, RS=int(_RS.value), GMAX=bound,
        BOUND_GROUP=GB if bound else GL_SCORE_BLOCK_N, MX=mx, SAMPLE=sample, num_warps=4, num_stages=1,
        **maxnreg))


def _plan_launches(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format, return_logits, config,
                   bufs, target):
    """``_plan``'s launches before ``LAUNCH_PDL``.

    ``bufs``: ``_buffers``'s dict: logits, the indices, and the scratch of the top-k path
    (radix: the per-row state, the selected list and two candidate-list buffers; row: the
    per-split histograms, the selected list and one candidate-list buffer; bound: the state,
    one candidate list and the group maxima)."""
    B, T = q.shape[:2]
    algo = _algo(config) if top_k > 0 else "none"
    plan = [_score_launch(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format, return_logits,
                          config, bufs, target, algo)]
    if top_k == 0:
        return plan
    logits, idx = bufs["logits"], bufs["idx"]
    max_len, S, TB = logits.shape[-1], int(config["NUM_SPLITS"]), int(config["TOPK_BLOCK"])
    RB, ch = int(config["RANK_BLOCK"]), int(config["PLACE_CHUNK"])
    if ch and (ch < 16 or ch & (ch - 1)):
        raise ValueError(f"PLACE_CHUNK must be 0 or a power of two >= 16, got {ch}")

    def place(sel, tie, rs, n_digits):
        """The launches that write the indices from the selected keys (and the ties)."""
        n_place = cdiv(top_k, ch if ch else RB)
        out = [(_radix_place_kernel, (B * T, n_place), dict(
            sel_ptr=sel, tie_ptr=tie, rs_ptr=rs, idx_ptr=idx, top_k=top_k, stride_sel=sel.stride(0),
            stride_tie=tie.stride(0), stride_idx=idx.stride(0), RANK_BLOCK=RB, TIE_MAX=_TIE_MAX, TOPK_BLOCK=TB,
            N_DIGITS=n_digits, PLACE_CHUNK=ch, num_warps=4, num_stages=1))]
        if ch:
            out.append((_radix_merge_rank_kernel, (B * T, n_place), dict(
                sel_ptr=sel, rs_ptr=rs, idx_ptr=idx, stride_sel=sel.stride(0), stride_idx=idx.stride(0),
                PLACE_CHUNK=ch, CHUNK_LOG2=ch.bit_length() - 1, N_CHUNKS=next_power_of_2(n_place),
                num_warps=4, num_stages=1)))
        return out

    if algo == "row":
        sel = bufs["sel"]
        plan.append((_row_topk_kernel, (B * T,), dict(
            logits_ptr=logits, seqlen_ptr=seq_lens, hist_ptr=bufs["rs"], sel_ptr=sel, cand_ptr=bufs["cand_a"],
            idx_ptr=idx, rs_ptr=bufs["state"], top_k=top_k, max_len=max_len, stride_sel=sel.stride(0),
            stride_idx=idx.stride(0), NEXT_N=T, NUM_SPLITS=S, HIST_ROWS=min(next_power_of_2(S), 16),
            TOPK_P2=sel.shape[-1], TOPK_BLOCK=TB, PLACE_CHUNK=ch, num_warps=ROW_WARPS, num_stages=1)))
        if ch:  # the row kernel leaves the selected keys unsorted (ties included), _REM + 4 zero
            plan += place(sel, sel, bufs["state"], 4)
        return plan
    P = radix_splits(config, max_len)
    if algo == "bound":
        rs, cand, GB = bufs["rs"], bufs["cand_a"], int(config["BOUND_GROUP"])
        parts, cap = bound_parts(max_len, GB), bound_select_cap(top_k)
        plan.append((_bound_threshold_kernel, (B * T, parts), dict(
            seqlen_ptr=seq_lens, gmax_ptr=bufs["gmax"], rs_ptr=rs, top_k=top_k, max_len=max_len,
            stride_gm=bufs["gmax"].stride(0), NEXT_N=T, BOUND_GROUP=GB, BOUND_PARTS=parts,
            **bound_gmax_block(cdiv(cdiv(max_len, GB), parts)), num_warps=4, num_stages=1)))
        plan.append((_bound_topk_kernel, (B * T, P), dict(
            logits_ptr=logits, seqlen_ptr=seq_lens, cand_ptr=cand, rs_ptr=rs, top_k=top_k, max_len=max_len,
            NEXT_N=T, TOPK_BLOCK=TB, TOPK_SPLITS=P, BOUND_GROUP=GB, BOUND_PARTS=parts, num_warps=4, num_stages=1)))
        plan.append((_bound_place_kernel, (B * T, cdiv(cap, RB)), dict(
            cand_ptr=cand, rs_ptr=rs, idx_ptr=idx, top_k=top_k, max_len=max_len, stride_idx=idx.stride(0),
            RANK_BLOCK=RB, SEL_CAP=cap, TOPK_BLOCK=TB, RANK_STEP=int(config["RANK_STEP"]), num_warps=4,
            num_stages=1)))
        return plan
    rs, sel, ca, cb = bufs["rs"], bufs["sel"], bufs["cand_a"], bufs["cand_b"]
    base = dict(logits_ptr=logits, seqlen_ptr=seq_lens, rs_ptr=rs, sel_ptr=sel, top_k=top_k, max_len=max_len,
                stride_sel=sel.stride(0), NEXT_N=T, TOPK_BLOCK=TB, TOPK_SPLITS=P, num_warps=4, num_stages=1)
    first = config["RADIX_FIRST"]
    if first not in RADIX_LEAD:
        raise ValueError(f"RADIX_FIRST must be one of {RADIX_FIRST}, got {first!r}")
    lead, sampled = RADIX_LEAD[first], first == "sampled"
    # the Gluon scoring kernel built the sampled digit-0 histogram (_score_launch's SAMPLE)
    presampled = plan[0][0] is _gl_score_kernel and plan[0][2]["SAMPLE"]
    C1, C2, C3, C4, C5, CT = (int(c.value) for c in (_CNT_C1, _CNT_C2, _CNT_C3, _CNT_C4, _CNT_C5, _CNT_TIE))

    def step(src, src_cnt, pick, dst, dst_cnt, hist, mode=0):
        c1x = int(_CNT_C1X.value) if sampled and src_cnt == C1 else 0  # C1: the sampled pick + its fallback
        return (_radix_pass_kernel, (B * T, P), dict(
            base, src_ptr=ca if src is None else src, FROM_LOGITS=src is None, SRC_CNT=src_cnt, PICK=pick,
            dst_ptr=ca if dst is None else dst, DST_CNT=dst_cnt, HIST=hist, stride_src=ca.stride(0),
            stride_dst=ca.stride(0), RADIX_FIRST=first, MODE=mode, SRC_CNT2=c1x))
    if sampled:
        steps = [step(None, 0, -1, None, 0, 0, mode=1)] * (not presampled)  # digit 0 over a sample of the logits
        steps += [step(None, 0, 0, ca, C1, -1, mode=2),  # every key at or above a safe digit-0 bin
                  step(None, 0, 0, ca, C1, -1, mode=3),  # too few (a bad sample): the rest
                  step(ca, C1, -1, None, 0, 1)]  # histogram of digit 1 (the quarter digit again, exact)
    else:
        steps = [step(None, 0, -1, None, 0, 0),   # histogram of digit 0 over the logits
                 step(None, 0, 0, ca, C1, -1),    # digit 0: select above, candidates in its bin
                 step(ca, C1, -1, None, 0, 1)]    # histogram of digit 1 over the candidates
    bufs_, cnts = (ca, cb), (C1, C2, C3, C4, C5)
    last = 3 + lead  # digits 0 .. last
    for j in range(1, last):  # digit j (+ histogram of digit j + 1), candidates ping-pong
        steps.append(step(bufs_[(j - 1) % 2], cnts[j - 1], j, bufs_[j % 2], cnts[j], j + 1))
    steps.append(step(bufs_[(last - 1) % 2], cnts[last - 1], last, bufs_[last % 2], CT, -1))  # ties at the k-th
    return plan + steps + place(sel, bufs_[last % 2], rs, 4 + lead)


def _buffers(B: int, T: int, max_len: int, top_k: int, return_logits: bool, config: dict[str, Any], device: Any,
             alloc=None) -> dict[str, Any]:
    """Outputs and scratch for ``_plan``: the logits (scratch when not returned: only the
    visible keys are written and read) and the indices; radix: ``[B*T, _RS]`` int32 state,
    the selected keys ``[B*T, top_k]`` and two ``[B*T, max_len]`` int64 candidate-list
    buffers (a digit's bin can hold every key of a row); row: ``[B*T, S, 256]`` int32
    histograms (one per scoring program and token), the selected keys ``[B*T,
    next_pow2(top_k)]`` (the sort's width), one ``[B*T, max_len]`` int64 candidate list and,
    with ``PLACE_CHUNK``, a state row per row for the placing launches; bound: the state,
    one candidate list and the ``[B*T, max_len / BOUND_GROUP]`` group maxima."""
    if alloc is None:
        def alloc(shape, dtype, fill=None):
            if fill is None:
                return torch.empty(shape, dtype=dtype, device=device)
            return torch.full(shape, fill, dtype=dtype, device=device)
    algo = _algo(config) if top_k > 0 else "none"
    logits = alloc((B, T, max_len), torch.float32, float("-inf") if return_logits else None)
    bufs = dict(logits=logits, idx=alloc((B * T, top_k), torch.int32),
                rs=alloc((1, int(_RS.value)), torch.int32), gmax=alloc((1, 1), torch.float32))
    if algo == "bound":
        bufs.update(rs=alloc((B * T, int(_RS.value)), torch.int32), cand_a=alloc((B * T, max_len), torch.int64),
                    gmax=alloc((B * T, cdiv(max_len, int(config["BOUND_GROUP"]))), torch.float32))
    elif algo == "radix":
        # SCORE_SAMPLE: the scoring kernel adds to the rows' state from its first tile, so it starts zeroed
        # (a fill launch; without the knob the scoring kernel's split 0 zeroes its row)
        zero = 0 if config["SCORE_SAMPLE"] else None
        bufs.update(rs=alloc((B * T, int(_RS.value)), torch.int32, zero), sel=alloc((B * T, top_k), torch.int64),
                    cand_a=alloc((B * T, max_len), torch.int64), cand_b=alloc((B * T, max_len), torch.int64))
    elif algo == "row":
        S, chunked = int(config["NUM_SPLITS"]), int(config["PLACE_CHUNK"]) > 0
        bufs.update(rs=alloc((B * T, S, 256), torch.int32),
                    sel=alloc((B * T, next_power_of_2(top_k)), torch.int64),
                    cand_a=alloc((B * T, max_len), torch.int64),
                    state=alloc((B * T if chunked else 1, int(_RS.value)), torch.int32))
    return bufs


KNOBS = {"BLOCK_N": ("pow2", 16, 128), "NUM_SPLITS": ("int", 1, 4096),
         "TOPK_ALGO": ("in", ("radix", "row", "bound")), "TOPK_BLOCK": ("pow2", 1, 8192),
         "TOPK_SPLITS": ("int", 1, 4096), "PLACE_CHUNK": ("int", 0, 8192), "RANK_BLOCK": ("pow2", 1, 1024),
         "RADIX_FIRST": ("in", RADIX_FIRST), "BOUND_GROUP": ("pow2", 1, 1024), "RANK_STEP": ("int", 1, 1 << 20),
         "LAUNCH_PDL": ("bool",), "num_warps": ("pow2", 1, 32), "num_stages": ("int", 1, 16),
         "SCORE_GLUON": ("bool",), "MX_FP8_DOT": ("bool",), "MX_WORD_DECODE": ("bool",),
         "SCORE_MAXNREG": ("int", 0, 255), "SCORE_SAMPLE": ("bool",)}
"""Every knob's type and range, checked before a launch (``check_knobs``)."""


def launch(*, config: dict[str, Any], q: torch.Tensor, weights: torch.Tensor, k_cache: torch.Tensor,
           k_scales: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor, top_k: int,
           k_format: str = "fp8", return_logits: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Validate, allocate, run the scoring kernel and the config's top-k path on ``q``'s device.

    Returns ``topk_idx [B, next_n, top_k] int32`` (and the logits with ``return_logits``).
    ``top_k=0`` with ``return_logits=True`` runs the scoring alone. ``seq_lens[b]`` must
    not exceed ``block_table.shape[1] * PAGE`` (not checked: a host sync).
    """
    check_knobs("sparse_mqa", config, KNOBS)
    _validate(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format)
    B, T = q.shape[:2]
    max_len = block_table.shape[1] * k_cache.shape[1]
    if top_k == 0 and not return_logits:
        return torch.empty((B, T, 0), dtype=torch.int32, device=q.device)
    bufs = _buffers(B, T, max_len, top_k, return_logits, config, q.device)
    for kern, grid, args in _plan(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format,
                                  return_logits, config, bufs, Target.of(q.device)):
        kern[grid](**args)
    idx = bufs["idx"].view(B, T, top_k)
    return (idx, bufs["logits"]) if return_logits else idx
