"""NVFP4 decode attention: shared-KV MQA over a paged latent cache + FP8 SWA window + sink.

One query token per sequence, ``H`` query heads against one latent
per entry (used as both K and V), global entries from a paged cache in ``nvfp4`` /
``fp8`` / ``bf16``, the last ``W = 128`` entries (SWA window) in FP8 E4M3 + UE8M0, and a
per-head sink logit that joins the softmax and is dropped.

Split-KV (flash-decoding), two launches: split programs each write a partial (max, sum,
unnormalised acc) in fp32 for one run of entries, and a reduce merges them with the sink.
The global splits run one of three kernels, chosen by the config:

- ``triton_kernels``: the Triton split kernel (any GPU, the interpreter; fp8 and bf16 caches).
- ``gluon_kernels`` (``GLUON``, sm_90 only): Gluon kernels with explicit layouts, nvfp4
  decoded straight into wgmma's register operand; ``GL_WS`` their warp-specialised form.
- ``blackwell`` (``USE_DOT_SCALED``, sm_100 only, not yet measured on a GPU): ``q @ K^T``
  on native block-scaled FP4 MMA.

The SWA window is always the Triton kernel's program ``NUM_SPLITS``; ``reference`` holds
the fp32 reference and the eager SDPA baseline.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from kernel_templates._gluon import gluon_available, gluon_on_hopper
from kernel_templates._host import cdiv, check_knobs, check_paged, next_power_of_2
from kernel_templates.nvfp4 import quantize_fp8_ue8m0, quantize_nvfp4
from kernel_templates.nvfp4_attention.blackwell import _bw_split_kernel
from kernel_templates.nvfp4_attention.gluon_kernels import GL_MAX_HEADS, GL_WARPS, _gl_split_kernel, _gl_ws_kernel
from kernel_templates.nvfp4_attention.reference import reference, torch_eager
from kernel_templates.nvfp4_attention.triton_kernels import _reduce_kernel, _split_kernel
from tuner import lowering, runtime
from tuner.runtime.target import Target
from tuner.spec import KernelSpec
from tuner.verify import assert_close

log = logging.getLogger(__name__)


D_LATENT = 512
SWA_WINDOW = 128
TOPK = 512
KV_DTYPES = ("nvfp4", "fp8", "bf16")
MODES = ("dense", "sparse")
BYTES_PER_ENTRY = {"nvfp4": 288, "fp8": 528, "bf16": 1024}
SWA_BYTES_PER_ENTRY = 528
_KV_CODE = {"nvfp4": 0, "fp8": 1, "bf16": 2}
LOG2E = 1.4426950408889634


# ----------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Workload:
    """One decode step: ``batch`` sequences of ``context`` global entries each."""

    batch: int
    context: int
    heads: int
    kv_dtype: str
    mode: str
    page: int = 64

    def __post_init__(self) -> None:
        if self.kv_dtype not in KV_DTYPES:
            raise ValueError(f"kv_dtype must be one of {KV_DTYPES}, got {self.kv_dtype!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")


def _wdict(w: Workload) -> dict[str, Any]:
    return {"batch": w.batch, "context": w.context, "heads": w.heads, "kv_dtype": w.kv_dtype, "mode": w.mode,
            "page": w.page}


def n_attended(w: Workload) -> int:
    """Global entries each query attends (the SWA window comes on top)."""
    return min(TOPK, w.context) if w.mode == "sparse" else w.context


def make_inputs(workload: Workload, device: str, seed: int) -> dict[str, Any]:
    """Latents ~ N(0, 1) quantized to the workload's KV dtype, pages shuffled across the
    pool, q with logits of std ~2, sinks ~ N(1, 1); sparse mode draws 512 distinct
    indices per sequence. A pool of at most 64K distinct quantized entries is tiled over
    the cache so inputs for 100+ GB caches are built in seconds."""
    w = workload
    g = torch.Generator(device="cpu").manual_seed(seed)
    B, H, N, D, page = w.batch, w.heads, w.context, D_LATENT, w.page
    pages_per_seq = cdiv(N, page)
    n_pages = B * pages_per_seq
    n_rows = n_pages * page
    n_pool = min(n_rows, 65536)
    pool = torch.randn(n_pool, D, generator=g).to(device)
    pick = torch.randint(0, n_pool, (n_rows,), generator=g).to(device)
    if w.kv_dtype == "nvfp4":
        pc, ps = quantize_nvfp4(pool)
        kv_codes, kv_scales = pc[pick].view(n_pages, page, D // 2), ps[pick].view(n_pages, page, D // 16)
    elif w.kv_dtype == "fp8":
        pc, ps = quantize_fp8_ue8m0(pool)
        kv_codes = pc.view(torch.uint8)[pick].view(torch.float8_e4m3fn).view(n_pages, page, D)
        kv_scales = ps[pick].view(n_pages, page, D // 32)
    else:
        kv_codes, kv_scales = pool.to(torch.bfloat16)[pick].view(n_pages, page, D), None
    del pool, pick
    block_table = torch.randperm(n_pages, generator=g).to(torch.int32).view(B, pages_per_seq).to(device)
    seq_lens = torch.full((B,), N, dtype=torch.int32, device=device)
    swa_kv, swa_scales = quantize_fp8_ue8m0(torch.randn(B, SWA_WINDOW, D, generator=g).to(device))
    q = (2.0 * torch.randn(B, H, D, generator=g)).to(torch.bfloat16).to(device)
    sink = (1.0 + torch.randn(H, generator=g)).to(device)
    topk_idx = None
    if w.mode == "sparse":
        k = min(TOPK, N)
        topk_idx = torch.stack([torch.randperm(N, generator=g)[:k] for _ in range(B)]).to(torch.int32).to(device)
    return dict(q=q, kv_codes=kv_codes, kv_scales=kv_scales, block_table=block_table, seq_lens=seq_lens,
                swa_kv=swa_kv, swa_scales=swa_scales, sink=sink, sm_scale=None, topk_idx=topk_idx,
                kv_dtype=w.kv_dtype)


def _floor_pow2(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def default_splits(w: Workload, block_h: int, block_n: int, sms: int) -> int:
    """Enough splits for ~2 waves of programs over ``sms`` SMs (one program per SM fits: ~255
    registers x 256 threads), none shorter than 2 tiles (sparse top-512 at B=16: 4 splits of
    128 entries, 80 programs on 132 SMs), at most 128 (so B=1 still fills an H200's 132 SMs)."""
    progs = w.batch * cdiv(w.heads, block_h)
    want = next_power_of_2(max(1, cdiv(2 * sms, progs)))
    most = max(1, n_attended(w) // (2 * block_n))
    s = 1
    while s * 2 <= min(want, most, 128):
        s *= 2
    return s


def default_config(workload: Workload, target: Target) -> dict[str, Any]:
    """The heuristic for ``workload`` on ``target``: 64-entry tiles, all heads of a KV tile in
    one program up to 64 (16 at H <= 16), 8 warps; nvfp4 at 16 heads on wgmma (``SWAP_AB``,
    4 warps), at 64 heads with the latent in 4 column chunks.

    From ptxas reports for sm_90 with Triton 3.6 ("loop" = SASS instructions per warp per
    64-entry tile of the global-KV loop; SWA = the window loop); none spills:

    ======================  ====  ======  ====  ====
    kv, H, BN x BH          regs  smem    loop  SWA
    ======================  ====  ======  ====  ====
    nvfp4 H16  64 x 16      248   100352   936   836
    fp8   H16  64 x 16      246    83968   850   841
    bf16  H16  64 x 16      250    83968   545   836
    nvfp4 H64  64 x 64      255   196608  1627  1615
    fp8   H64  64 x 64      255   131072  1495  1795
    bf16  H64  64 x 64      255   131072  1219  1781
    ======================  ====  ======  ====  ====

    At H=64 one 64-head program per tile beats two 32-head programs and four 16-head ones:
    the tile is decoded once for all heads. Measured on an H200 (B=16, N=32K): nvfp4 at 16
    heads runs faster on wgmma (SWAP_AB, 4 warps: 253 us vs 325 for mma.sync at 8 warps),
    fp8 does not (336 vs 302); nvfp4 at 64 heads with D_CHUNKS 4: 477 vs 618 us.

    ``GLUON`` at 16 heads on an sm_90 GPU (its 64 x 16 tile is the SWAP_AB default's):
    1.4-1.95x the tuned Triton configs on an H200 at B 16 / 64, 32K / 128K; raw codes two
    chunks ahead (``GL_AHEAD`` 2: 225 registers, not 255), 1.02-1.05x there. Dense nvfp4
    with more than 16 heads on sm_90: ``_gl_wide_default``.
    """
    w = workload
    bh = min(64, max(16, next_power_of_2(w.heads)))
    nvfp4 = w.kv_dtype == "nvfp4"
    if nvfp4 and w.mode == "dense" and bh > 16 and gluon_on_hopper(target):
        return _gl_wide_default(w, target)
    swap = nvfp4 and bh == 16
    gluon = swap and gluon_on_hopper(target)
    return {"BLOCK_N": 64, "BLOCK_H": bh, "NUM_SPLITS": default_splits(w, bh, 64, target.sms),
            "USE_DOT_SCALED": False, "SWAP_AB": swap, "D_CHUNKS": 4 if nvfp4 and bh == 64 else 1,
            "num_warps": 4 if swap else 8, "num_stages": 2, "GLUON": gluon, "GL_AHEAD": 2 if gluon else 4,
            "GL_WS": 0, "GL_WS_A": 0}


def _gl_wide_default(w: Workload, target: Target) -> dict[str, Any]:
    """GLUON on 128-entry tiles (two warpgroups, one program an SM: 169-210 KB shared) for
    dense nvfp4 with more than 16 heads: 32 heads a program and ~one program an SM in all
    (``progs``: 128 on 132 SMs), but never under 2 tiles a split (the tuned Triton kernel
    measured 1.03-1.51x slower on an H200 at 64 heads). Fewer splits than ``default_splits``:
    the fp32 partials of 32 heads are 64 KB a split and sequence. From ``progs`` x 32 tiles of
    64 entries x 64-head blocks up (2^18 pairs on an H200), ``GL_WS`` (``_gl_ws_default``)."""
    progs = _floor_pow2(target.sms)
    blocks = w.batch * cdiv(w.heads, 64)
    if w.heads > 32 and blocks * n_attended(w) >= progs * 32 * 64:
        return _gl_ws_default(w, blocks, progs)
    cap = min(progs // (w.batch * cdiv(w.heads, 32)), n_attended(w) // 256, 128)
    s = 1
    while s * 2 <= cap:
        s *= 2
    return {"BLOCK_N": 128, "BLOCK_H": 32, "NUM_SPLITS": s, "USE_DOT_SCALED": False, "SWAP_AB": True,
            "D_CHUNKS": 1, "num_warps": 8, "num_stages": 2, "GLUON": True, "GL_AHEAD": 4, "GL_WS": 0, "GL_WS_A": 0}


def _gl_ws_default(w: Workload, blocks: int, progs: int) -> dict[str, Any]:
    """``GL_WS`` with ``GL_WS_A`` (64 heads a program on 64-entry tiles, the decoder's ``K q^T``
    from shared memory), ~``progs`` programs, at least 16 tiles a split. On an H200 at 64 heads
    it beat the 128-entry default 1.19-1.35x at B = 16 and 64 (8K-128K), 1.20x at B = 256,
    1.10x at B = 8 32K and 1.19x at B = 4 128K; it lost at B = 4 32K (1.02x slower) and at B = 1
    (up to 128 splits: at most 16 tiles each). ``GL_WS_A`` 1 won every 64-head GL_WS entry by
    1.03-1.04x."""
    cap = min(max(1, progs // blocks), max(1, n_attended(w) // 1024))
    s = 1
    while s * 2 <= cap:
        s *= 2
    return {"BLOCK_N": 64, "BLOCK_H": 64, "NUM_SPLITS": s, "USE_DOT_SCALED": False, "SWAP_AB": True,
            "D_CHUNKS": 1, "num_warps": gl_ws_launch(64)["NW"], "num_stages": 2, "GLUON": True, "GL_AHEAD": 4,
            "GL_WS": 1, "GL_WS_A": 1}


def cost(workload: Workload) -> tuple[float, float]:
    """The floor: ``B*(N_att*b_kv + 128*528 + H*512*2*2)`` bytes, ``4*H*512*(N_att+128)*B`` flops."""
    w = workload
    n = n_attended(w)
    nbytes = w.batch * (n * BYTES_PER_ENTRY[w.kv_dtype] + SWA_WINDOW * SWA_BYTES_PER_ENTRY + w.heads * D_LATENT * 4)
    flops = 4 * w.heads * D_LATENT * (n + SWA_WINDOW) * w.batch
    return float(nbytes), float(flops)


def memory_bytes(workload: Workload, num_splits: int = 64) -> int:
    """Device memory the kernel's inputs, partials and output take (no baseline, no reference)."""
    w = workload
    rows = w.batch * cdiv(w.context, w.page) * w.page
    cache = rows * BYTES_PER_ENTRY[w.kv_dtype]
    swa = w.batch * SWA_WINDOW * SWA_BYTES_PER_ENTRY
    partials = w.batch * w.heads * (num_splits + 1) * (D_LATENT + 2) * 4
    return cache + swa + partials + w.batch * w.heads * D_LATENT * 4 + w.batch * 4 * cdiv(w.context, w.page)


def feasible(workload: Workload, budget_bytes: int | None = None) -> str | None:
    """None when the workload fits on the device, else the reason (the point is skipped).

    Budget: 70% of the GPU's memory when one is visible (room for the reference and
    the timing buffers), else the 141 GB of an H200.
    """
    if budget_bytes is None:
        total = 141 * 10**9
        if not Target.of().interpret:
            total = torch.cuda.get_device_properties(0).total_memory
        budget_bytes = int(0.7 * total)
    need = memory_bytes(workload)
    if need > budget_bytes:
        return (f"needs {need / 1e9:.1f} GB of device memory for the {workload.kv_dtype} cache and partials, "
                f"budget {budget_bytes / 1e9:.1f} GB")
    return None


# ----------------------------------------------------------------------------- launcher


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


def _validate(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx, kv_dtype) -> None:
    if kv_dtype not in KV_DTYPES:
        raise ValueError(f"kv_dtype must be one of {KV_DTYPES}, got {kv_dtype!r}")
    _check("q", q, (None, None, None), (torch.bfloat16,))
    B, H, D = q.shape
    if D < 32 or D & (D - 1):
        raise ValueError(f"latent width D={D} must be a power of two >= 32")
    P = kv_codes.shape[0] if isinstance(kv_codes, torch.Tensor) and kv_codes.dim() == 3 else None
    page = kv_codes.shape[1] if P is not None else None
    if kv_dtype == "nvfp4":
        _check("kv_codes", kv_codes, (None, None, D // 2), (torch.uint8,))
        _check("kv_scales", kv_scales, (P, page, D // 16), (torch.uint8,))
    elif kv_dtype == "fp8":
        _check("kv_codes", kv_codes, (None, None, D), (torch.float8_e4m3fn,))
        _check("kv_scales", kv_scales, (P, page, D // 32), (torch.uint8,))
    else:
        _check("kv_codes", kv_codes, (None, None, D), (torch.bfloat16,))
        if kv_scales is not None:
            raise ValueError("kv_scales must be None for kv_dtype='bf16'")
    page = kv_codes.shape[1]
    if page < 16 or page & (page - 1):
        raise ValueError(f"page size {page} must be a power of two >= 16")
    _check("block_table", block_table, (B, None), (torch.int32,))
    _check("seq_lens", seq_lens, (B,), (torch.int32,))
    _check("swa_kv", swa_kv, (B, None, D), (torch.float8_e4m3fn,))
    _check("swa_scales", swa_scales, (B, swa_kv.shape[1], D // 32), (torch.uint8,))
    _check("sink", sink, (H,), (torch.float32,))
    if topk_idx is not None:
        _check("topk_idx", topk_idx, (B, None), (torch.int32,))
    check_paged(block_table, seq_lens, kv_codes.shape[0], page)


REDUCE_TILE = 4096  # fp32 elements of one partial chunk load of the reduce (32 per thread)


def _reduce_blocks(B: int, H: int, D: int, S: int, programs: int) -> tuple[int, int, int, int]:
    """Host heuristic for ``_reduce_kernel`` (not tuned; configs do not name it):
    (BLOCK_HR, BLOCK_DR, BLOCK_S, num_warps) for a grid of about ``programs`` (2 an SM).

    Columns 128 wide, 64 while the grid is short of ``programs`` (never narrower: a row of a
    partial stays 256 contiguous bytes); then fewer heads per program (8 down to 2) until the
    grid reaches it. B=8 H=16 on 132 SMs: 4 heads x 64 columns, grid (8, 4, 8) = 256; B=8
    H=64: 8 x 128, grid (8, 8, 4) = 256. At most 8 heads: the (m, l) of all splits are one
    ``[BLOCK_HR, SPLITS_P2]`` tile, and 16 heads x 128 splits took 225 registers (sm_90,
    Triton 3.6) where 8 take <= 168. ``BLOCK_S``: splits per partial load, ``REDUCE_TILE``
    fp32 elements (B=8 H=16: 16 splits x 4 x 64; two chunks are in flight at a time)."""
    bdr = min(D, 128)
    bhr = min(8, next_power_of_2(H))
    progs = lambda: B * cdiv(H, bhr) * (D // bdr)  # noqa: E731
    if progs() < programs:
        bdr = min(D, 64)
    while progs() < programs and bhr > 2:
        bhr //= 2
    bs = max(1, min(next_power_of_2(S), REDUCE_TILE // (bhr * bdr)))
    return bhr, bdr, bs, 4


def _reduce_launch(m_buf: torch.Tensor, l_buf: torch.Tensor, acc_buf: torch.Tensor, sink: torch.Tensor,
                   out: torch.Tensor, target: Target) -> tuple[Any, tuple[int, int, int], dict[str, Any]]:
    """The reduce launch (kernel, grid, args) for partials ``m, l [B, H, S + 1]``,
    ``acc [B, H, S + 1, D]`` into ``out [B, H, D]``; blocks from ``_reduce_blocks``."""
    B, H, S1, D = acc_buf.shape
    bhr, bdr, bs, nw = _reduce_blocks(B, H, D, S1 - 1, 2 * target.sms)
    args = dict(
        m_ptr=m_buf, l_ptr=l_buf, acc_ptr=acc_buf, sink_ptr=sink, out_ptr=out, H=H,
        stride_mb=m_buf.stride(0), stride_mh=m_buf.stride(1), stride_ab=acc_buf.stride(0),
        stride_ah=acc_buf.stride(1), stride_as=acc_buf.stride(2), stride_ob=out.stride(0), stride_oh=out.stride(1),
        D=D, NUM_SPLITS=S1 - 1, BLOCK_HR=bhr, BLOCK_DR=bdr, BLOCK_S=bs, SPLITS_P2=next_power_of_2(S1),
        num_warps=nw, num_stages=1,
    )
    return _reduce_kernel, (B, cdiv(H, bhr), D // bdr), args


GL_WS_DEC_REGS = 168
"""The decoder warpgroup's register cap (setmaxnreg): raw codes two chunks ahead (18 registers),
two decoded chunks while a wgmma reads one (64), the scores' accumulator (8-32) and the row
addresses. At 64 heads (12 warps, ``maxnreg`` 168) the MMA partition gets 168 too; Triton 3.6
sm_90 then spills ~10 scalar loads a tile in the decoder (a tile of raw codes ahead spilled at
184)."""


def gl_ws_launch(block_h: int) -> dict[str, int]:
    """Warps and registers of the ``GL_WS`` kernel: the default partition's warps (``NW``: a
    warpgroup per 32 heads), the decoder's register cap (``DEC_REGS``) and the kernel's
    ``maxnreg``, which spreads the SM's 64K registers over all the warps (the default partition
    gets what the decoder leaves)."""
    nw = 4 if block_h <= 32 else 8
    maxnreg = min(248, (65536 // (32 * (nw + 4))) // 8 * 8)
    return {"NW": nw, "DEC_REGS": GL_WS_DEC_REGS, "maxnreg": maxnreg}


def gl_ws_error(config: dict[str, Any], sparse: bool) -> str | None:
    """Why ``config`` cannot run the warp-specialised GLUON kernel (``GL_WS``); None: it can."""
    if config["GL_WS"] != 1:
        return f"GL_WS={config['GL_WS']}: 0 or 1 (one decoder warpgroup)"
    if not config["GLUON"] or config["BLOCK_N"] != 64 or config["BLOCK_H"] not in (16, 32, 64) or sparse:
        return "GL_WS applies to GLUON, dense mode, BLOCK_N 64, BLOCK_H 16, 32 or 64"
    return None


_GLUON_ARGS = ("q_ptr", "kv_ptr", "kvs_ptr", "bt_ptr", "seqlen_ptr", "topk_ptr", "m_ptr", "l_ptr", "acc_ptr", "H",
               "n_topk", "qk_scale", "stride_qb", "stride_qh", "stride_kp", "stride_ks", "stride_sp", "stride_ss",
               "stride_btb", "stride_tb", "stride_mb", "stride_mh", "stride_ab", "stride_ah", "stride_as", "PAGE",
               "SPARSE", "BLOCK_H", "NUM_SPLITS", "BLOCK_N")


def _plan(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx, kv_dtype,
          sm_scale, config, out, partials, target: Target):
    """The launches as (kernel, grid, args dict) on ``target``; shared by ``launch`` and
    ``lower_signatures``."""
    B, H, D = q.shape
    page = kv_codes.shape[1]
    S, BH, BN = int(config["NUM_SPLITS"]), int(config["BLOCK_H"]), int(config["BLOCK_N"])
    chunks, gluon, dot_scaled = int(config["D_CHUNKS"]), bool(config["GLUON"]), bool(config["USE_DOT_SCALED"])
    if page % BN and BN % page:
        raise ValueError(f"BLOCK_N={BN} and the page size {page} must divide one another")
    if BH < 16 or BN < 16:
        raise ValueError("BLOCK_H and BLOCK_N must be >= 16 (MMA tile)")
    if chunks not in (1, 4) or (chunks > 1 and (gluon or dot_scaled)):
        raise ValueError(f"D_CHUNKS={chunks}: must be 1 or 4, and 1 with GLUON or USE_DOT_SCALED")
    m_buf, l_buf, acc_buf = partials
    kv = kv_codes.view(torch.uint8) if kv_dtype == "fp8" else kv_codes
    kvs = kv_scales if kv_scales is not None else kv_codes  # unused for bf16: any pointer
    tk = topk_idx if topk_idx is not None else seq_lens
    split_args = dict(
        q_ptr=q, kv_ptr=kv, kvs_ptr=kvs, bt_ptr=block_table, seqlen_ptr=seq_lens,
        swa_ptr=swa_kv.view(torch.uint8), swas_ptr=swa_scales, topk_ptr=tk,
        m_ptr=m_buf, l_ptr=l_buf, acc_ptr=acc_buf,
        H=H, n_topk=topk_idx.shape[1] if topk_idx is not None else 0, W=swa_kv.shape[1],
        qk_scale=(D ** -0.5 if sm_scale is None else float(sm_scale)) * LOG2E,
        stride_qb=q.stride(0), stride_qh=q.stride(1), stride_kp=kv.stride(0), stride_ks=kv.stride(1),
        stride_sp=kvs.stride(0), stride_ss=kvs.stride(1), stride_btb=block_table.stride(0),
        stride_wb=swa_kv.stride(0), stride_ww=swa_kv.stride(1), stride_wsb=swa_scales.stride(0),
        stride_wsw=swa_scales.stride(1), stride_tb=tk.stride(0),
        stride_mb=m_buf.stride(0), stride_mh=m_buf.stride(1), stride_ab=acc_buf.stride(0),
        stride_ah=acc_buf.stride(1), stride_as=acc_buf.stride(2),
        D=D, PAGE=page, KV_DTYPE=_KV_CODE[kv_dtype], SPARSE=topk_idx is not None,
        BLOCK_N=BN, BLOCK_H=BH, NUM_SPLITS=S, SWAP_AB=bool(config["SWAP_AB"]), D_CHUNKS=chunks, SPLIT0=0,
        INTERPRET=target.interpret, num_warps=int(config["num_warps"]), num_stages=int(config["num_stages"]),
    )
    reduce = _reduce_launch(m_buf, l_buf, acc_buf, sink, out, target)
    if not gluon and not dot_scaled:
        return [(_split_kernel, (B, cdiv(H, BH), S + 1), split_args), reduce]
    if gluon and dot_scaled:
        raise ValueError("GLUON and USE_DOT_SCALED are two kernels for the global splits: one at a time")
    if kv_dtype != "nvfp4":
        raise ValueError("GLUON / USE_DOT_SCALED apply to kv_dtype='nvfp4' only")
    if dot_scaled:
        if target.cc < 100:
            raise ValueError("USE_DOT_SCALED needs an sm_100 GPU (tcgen05 block-scaled MMA)")
        bw_args = {k: split_args[k] for k in (*_GLUON_ARGS, "D", "num_warps", "num_stages")}
        # the window's Triton program: the config's tile, SWAP_AB as the dot-scaled scores
        swa_args = dict(split_args, SPLIT0=S, SWAP_AB=True)
        return [(_bw_split_kernel, (B, cdiv(H, BH), S), bw_args), (_split_kernel, (B, cdiv(H, BH), 1), swa_args),
                reduce]
    ws = int(config["GL_WS"])
    if D != D_LATENT or (not ws and BH > GL_MAX_HEADS.get(BN, 0)):
        raise ValueError(f"GLUON applies to kv_dtype='nvfp4', D={D_LATENT}, BLOCK_N 64 (BLOCK_H <= 32) or 128 "
                         "(BLOCK_H <= 64)")
    if not gluon_available(target):
        raise ValueError("GLUON needs Triton's Gluon (triton >= 3.5) and a GPU (not TRITON_INTERPRET)")
    gl_args = {k: split_args[k] for k in _GLUON_ARGS}
    words = kv_codes.view(torch.int32)  # whole 32-bit words of codes
    pairs = kv_scales.view(torch.int16)  # the two scales of a 32-column chunk at once
    gl_args.update(kv_ptr=words, stride_kp=words.stride(0), stride_ks=words.stride(1), kvs_ptr=pairs,
                   stride_sp=pairs.stride(0), stride_ss=pairs.stride(1), num_warps=GL_WARPS[BN])
    if ws:
        why = gl_ws_error(config, topk_idx is not None)
        if why:
            raise ValueError(why)
        for k in ("topk_ptr", "n_topk", "stride_tb", "SPARSE"):
            gl_args.pop(k)
        launch_opts = gl_ws_launch(BH)
        gl_args.update(SMEM_A=bool(config["GL_WS_A"]), DEC_REGS=launch_opts["DEC_REGS"],
                       maxnreg=launch_opts["maxnreg"], num_warps=launch_opts["NW"])
    else:
        if config["GL_AHEAD"] not in (2, 4):
            raise ValueError(f"GL_AHEAD={config['GL_AHEAD']}: 128-column chunks of raw codes ahead, 2 or 4")
        gl_args["AHEAD"] = int(config["GL_AHEAD"])
    # the window's Triton program: 64 x 16 SWAP_AB tiles on 8 warps, the most programs for the
    # window's few tokens (docs/performance.md: 1.27-1.36x the whole call at batch 1)
    swa_bh = min(BH, 16)
    swa_args = dict(split_args, SPLIT0=S, D_CHUNKS=1, BLOCK_N=64, BLOCK_H=swa_bh, SWAP_AB=True, num_warps=8)
    return [(_gl_ws_kernel if ws else _gl_split_kernel, (B, cdiv(H, BH), S), gl_args),
            (_split_kernel, (B, cdiv(H, swa_bh), 1), swa_args), reduce]


KNOBS = {"BLOCK_N": ("pow2", 1, 4096), "BLOCK_H": ("pow2", 1, 1024), "NUM_SPLITS": ("int", 1, 4096),
         "USE_DOT_SCALED": ("bool",), "SWAP_AB": ("bool",), "D_CHUNKS": ("int", 1, 64), "GLUON": ("bool",),
         "GL_AHEAD": ("int", 1, 16), "GL_WS": ("in", (0, 1)), "GL_WS_A": ("in", (0, 1)),
         "num_warps": ("pow2", 1, 32), "num_stages": ("int", 1, 16)}
"""Every knob's type and range, checked before a launch (``check_knobs``)."""


def launch(*, config: dict[str, Any], q: torch.Tensor, kv_codes: torch.Tensor, kv_scales: torch.Tensor | None,
           block_table: torch.Tensor, seq_lens: torch.Tensor, swa_kv: torch.Tensor, swa_scales: torch.Tensor,
           sink: torch.Tensor, sm_scale: float | None = None, topk_idx: torch.Tensor | None = None,
           kv_dtype: str = "nvfp4") -> torch.Tensor:
    """Validate, allocate the partials and the output, and run split + reduce. ``[B, H, D]`` bf16.

    ``seq_lens[b]`` must not exceed ``block_table.shape[1] * PAGE`` (checked on a GPU only with
    ``TUNER_CHECK_INPUTS=1``: a host sync; ``_host.check_paged``).
    """
    _validate(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx, kv_dtype)
    check_knobs("nvfp4_attention", config, KNOBS)
    B, H, D = q.shape
    S = int(config["NUM_SPLITS"])
    dev = q.device
    out = torch.empty(B, H, D, dtype=torch.bfloat16, device=dev)
    partials = (torch.empty(B, H, S + 1, dtype=torch.float32, device=dev),
                torch.empty(B, H, S + 1, dtype=torch.float32, device=dev),
                torch.empty(B, H, S + 1, D, dtype=torch.float32, device=dev))
    for kern, grid, args in _plan(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx,
                                  kv_dtype, sm_scale, config, out, partials, Target.of(dev)):
        kern[grid](**args)
    return out


# ----------------------------------------------------------------------------- public API


def nvfp4_decode_attention(q: torch.Tensor, kv_codes: torch.Tensor, kv_scales: torch.Tensor | None,
                           block_table: torch.Tensor, seq_lens: torch.Tensor, swa_kv: torch.Tensor,
                           swa_scales: torch.Tensor, sink: torch.Tensor, *, sm_scale: float | None = None,
                           topk_idx: torch.Tensor | None = None, kv_dtype: str = "nvfp4",
                           config: dict[str, Any] | None = None) -> torch.Tensor:
    """Decode attention over the paged global KV + FP8 SWA window + sink: ``[B, H, 512]`` bf16.

    Layouts: ``q [B, H, D]`` bf16; ``nvfp4``: ``kv_codes [pages,
    PAGE, D/2] uint8`` + ``kv_scales [pages, PAGE, D/16] uint8`` (E4M3 bits); ``fp8``:
    ``float8_e4m3fn [pages, PAGE, D]`` + UE8M0 ``[pages, PAGE, D/32]``; ``bf16``: bf16
    codes, ``kv_scales=None``. ``block_table [B, max_pages] int32``, ``seq_lens [B]
    int32``, ``swa_kv [B, W, D] float8_e4m3fn`` + ``swa_scales [B, W, D/32]`` (the first
    ``min(seq_len, W)`` rows valid), ``sink [H] fp32``; ``topk_idx [B, K] int32`` (sparse
    mode, -1 skipped). ``config=None`` picks the tuned config of the active pack.
    """
    _validate(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx, kv_dtype)
    if config is None:
        B, H, _ = q.shape
        wl = Workload(batch=B, context=int(block_table.shape[1]) * int(kv_codes.shape[1]), heads=H,
                      kv_dtype=kv_dtype, mode="dense" if topk_idx is None else "sparse", page=int(kv_codes.shape[1]))
        config = runtime.select("nvfp4_attention", _wdict(wl), Target.of(q.device)).config
    return launch(config=config, q=q, kv_codes=kv_codes, kv_scales=kv_scales, block_table=block_table,
                  seq_lens=seq_lens, swa_kv=swa_kv, swa_scales=swa_scales, sink=sink, sm_scale=sm_scale,
                  topk_idx=topk_idx, kv_dtype=kv_dtype)


# ----------------------------------------------------------------------------- verify, lowering


def verify(out: torch.Tensor, ref: torch.Tensor, inputs: dict[str, Any]) -> None:
    """bf16 output against the fp32 reference: P is rounded to 16 bits for the MMA and the
    output to bf16, so ``|out - ref| <= 1e-2 * |ref| + 4e-3 * max|ref|`` per sequence."""
    if out.dtype != torch.bfloat16:
        raise AssertionError(f"out: dtype {out.dtype}, want torch.bfloat16")
    scale = ref.abs().amax(dim=(1, 2), keepdim=True).clamp(min=1e-6)
    assert_close("out", out.float() / scale, ref.float() / scale, atol=4e-3, rtol=1e-2)


def lower_signatures(workload: Workload, config: dict[str, Any],
                     target: Target) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    """Each launch ``launch`` does for this workload/config on ``target`` (a GPU): (jit fn,
    signature, constexprs). Needs ``TRITON_INTERPRET`` unset (the interpreter's kernels are
    not compilable)."""
    w = workload
    B, H, D, page = w.batch, w.heads, D_LATENT, w.page
    m = lambda *s, dt=torch.float32: torch.empty(*s, dtype=dt, device="meta")  # noqa: E731
    pages = B * cdiv(w.context, page)
    codes = {"nvfp4": m(pages, page, D // 2, dt=torch.uint8), "fp8": m(pages, page, D, dt=torch.float8_e4m3fn),
             "bf16": m(pages, page, D, dt=torch.bfloat16)}[w.kv_dtype]
    scales = {"nvfp4": m(pages, page, D // 16, dt=torch.uint8), "fp8": m(pages, page, D // 32, dt=torch.uint8),
              "bf16": None}[w.kv_dtype]
    S = int(config["NUM_SPLITS"])
    partials = (m(B, H, S + 1), m(B, H, S + 1), m(B, H, S + 1, D))
    launches = _plan(m(B, H, D, dt=torch.bfloat16), codes, scales, m(B, pages // B, dt=torch.int32),
                     m(B, dt=torch.int32), m(B, SWA_WINDOW, D, dt=torch.float8_e4m3fn),
                     m(B, SWA_WINDOW, D // 32, dt=torch.uint8), m(H),
                     m(B, TOPK, dt=torch.int32) if w.mode == "sparse" else None, w.kv_dtype, None, config,
                     m(B, H, D, dt=torch.bfloat16), partials, target)
    return [(kern, *lowering.signature(kern, args)) for kern, _grid, args in launches]


baselines = {"torch_eager": torch_eager}

runtime.register_defaults("nvfp4_attention", lambda wd, target: default_config(Workload(**wd), target))
runtime.register_check("nvfp4_attention", lambda c: check_knobs("nvfp4_attention", c, KNOBS))

SPEC = KernelSpec(
    name="nvfp4_attention",
    workload=Workload,
    make_inputs=make_inputs,
    reference=reference,
    launch=launch,
    default_config=default_config,
    cost=cost,
    verify=verify,
    baselines=baselines,
    launch_bound=True,
    description="NVFP4 / FP8 / BF16 paged decode attention (MQA latent 512 + FP8 SWA window + sink), split-KV",
)
