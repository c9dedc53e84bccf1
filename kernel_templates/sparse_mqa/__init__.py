"""Sparse MQA indexer ("lightning indexer"): scoring over a paged key cache, then an exact top-k.

``I[t, s] = sum_j w[t, j] * relu(q[t, j] . k[s]) * k_scale[s]`` for
the keys a query token sees, then the ``top_k`` keys by descending score (ties: lower
index first), ``-1`` where fewer keys are visible. Key formats: ``fp8`` (128 E4M3 + one
fp32 scale per key, 132 B) and ``mxfp4`` (64 B of E2M1 codes + 4 UE8M0 scales, 68 B, no
per-key scale). Causality for ``next_n > 1``: query ``i`` sees ``seq_len - next_n + i + 1`` keys.

The package: the public API (``mqa_topk``), ``Workload``, the default heuristics and
``SPEC`` here; ``reference`` (PyTorch), ``scoring`` (the Triton scoring kernel),
``scoring_gluon`` (``SCORE_GLUON``: the sm_90 Gluon scoring kernel), ``topk`` (the radix
and row top-k paths), ``bound`` (the bound top-k path), ``common`` (the order keys and
digits they share), ``launcher`` (validation, buffers, the launch plan for a ``Target``).
The scoring kernel writes the visible scores; one of three exact top-k paths selects from
them (``TOPK_ALGO``): row-parallel radix passes, one program a row, or a filter at a bound
derived from group maxima. ``LAUNCH_PDL`` starts the top-k launches of the radix and bound
paths as programmatic dependent launches (sm_90+); ``SCORE_MAXNREG`` caps the scoring
launch's registers (96: five 4-warp programs an SM for fp8 keys).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kernel_templates._host import cdiv, check_knobs, next_power_of_2
from kernel_templates.nvfp4 import quantize_mxfp4
from kernel_templates.sparse_mqa.common import (_RS, BYTES_PER_KEY, D_INDEX, K_FORMATS, PAGE, PROFILES, RADIX_FIRST,
                                                TOPK_ALGOS)
from kernel_templates.sparse_mqa.launcher import KNOBS, _algo, _buffers, _plan, _validate, launch
from kernel_templates.sparse_mqa.reference import reference, scores_at, topk_of_logits, torch_eager, visible
from kernel_templates.sparse_mqa.scoring_gluon import score_gluon_error
from tuner import lowering, runtime
from tuner.runtime.target import Target
from tuner.spec import KernelSpec
from tuner.verify import assert_close

__all__ = ["mqa_topk", "launch", "reference", "torch_eager", "topk_of_logits", "Workload", "default_config",
           "make_inputs", "cost", "feasible", "verify", "SPEC", "PROFILES", "PAGE", "D_INDEX", "K_FORMATS", "TOPK_ALGOS",
           "RADIX_FIRST"]


# default_config: the row top-k up to this context for a top-k up to this size, radix otherwise
# (search_spaces.sparse_mqa.ROW_MAX_CONTEXT: how far the tuner may take it)
ROW_DEFAULT_MAX_CONTEXT = 8192
ROW_DEFAULT_MAX_TOPK = 1024
ROW_DEFAULT_MAX_SPLITS = 32  # the row kernel first sums every split's histogram, 16 a step


@dataclass(frozen=True)
class Workload:
    """One decode step: ``batch`` sequences of ``context`` keys, ``next_n`` query tokens each."""

    batch: int
    context: int
    next_n: int
    profile: str

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"profile must be one of {sorted(PROFILES)}, got {self.profile!r}")


def _wdict(w: Workload) -> dict[str, Any]:
    return {"batch": w.batch, "context": w.context, "next_n": w.next_n, "profile": w.profile}


def make_inputs(workload: Workload, device: str, seed: int) -> dict[str, Any]:
    """Keys ~ N(0, 1) quantized to the profile's format (fp8: per-key scale amax/448;
    mxfp4: UE8M0 per 32), pages shuffled across the pool, q ~ N(0, 1) in FP8, weights ~
    N(0, 1) * H^-0.5 * 128^-0.5 (mixed signs, as after the folding), every sequence full.
    At most 64K distinct keys are tiled over the cache (inputs for GB caches in seconds;
    repeated keys give exactly tied scores, which the tie rule orders)."""
    w = workload
    prof = PROFILES[w.profile]
    H, fmt = prof["heads"], prof["k_format"]
    g = torch.Generator(device="cpu").manual_seed(seed)
    B, N, T, D = w.batch, w.context, w.next_n, D_INDEX
    pages_per_seq = cdiv(N, PAGE)
    n_pages = B * pages_per_seq
    n_rows = n_pages * PAGE
    n_pool = min(n_rows, 65536)
    pool = torch.randn(n_pool, D, generator=g).to(device)
    if n_rows <= n_pool:
        pick = torch.arange(n_rows, device=device)  # all keys distinct (the pages are shuffled below)
    else:
        pick = torch.randint(0, n_pool, (n_rows,), generator=g).to(device)
    if fmt == "fp8":
        s = pool.abs().amax(-1).clamp(min=1e-4) / 448.0
        codes = (pool / s[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
        k_cache = codes.view(torch.uint8)[pick].view(torch.float8_e4m3fn).view(n_pages, PAGE, D)
        k_scales = s[pick].view(n_pages, PAGE)
    else:
        pc, ps = quantize_mxfp4(pool)
        k_cache, k_scales = pc[pick].view(n_pages, PAGE, D // 2), ps[pick].view(n_pages, PAGE, D // 32)
    del pool, pick
    block_table = torch.randperm(n_pages, generator=g).to(torch.int32).view(B, pages_per_seq).to(device)
    seq_lens = torch.full((B,), N, dtype=torch.int32, device=device)
    q = torch.randn(B, T, H, D, generator=g).to(torch.float8_e4m3fn).to(device)
    weights = (torch.randn(B, T, H, generator=g) * (H ** -0.5 * D ** -0.5)).to(device)
    return dict(q=q, weights=weights, k_cache=k_cache, k_scales=k_scales, block_table=block_table,
                seq_lens=seq_lens, top_k=prof["top_k"], k_format=fmt, return_logits=False)


def default_splits(w: Workload, block_n: int, sms: int, per_sm: int = 4, cap: int = 512) -> int:
    """Splits (a power of two, rounded down) for about ``per_sm`` scoring programs an SM over
    the batch, none shorter than a tile, at most ``cap``.

    Why 4 an SM: the scoring kernel keeps one or two key tiles in flight a program (sm_90,
    Triton 3.6: one 8 KB async-copy buffer at num_stages 2-4, 96 registers at 4 warps for
    fp8; two at ``RADIX_SCORE_STAGES`` = 5, 107 registers: four programs fit an SM), so
    bandwidth follows the programs resident an SM. Measured on an H200 (num_stages 2): dsv32
    512K scoring at B=32 (16 splits, ~3.9 programs an SM) 64% of the floor, at B=1 (128
    splits, one an SM) 18%."""
    limit = min(max(1, per_sm * sms // w.batch), max(1, w.context // block_n), cap)
    s = 1
    while s * 2 <= limit:
        s *= 2
    return s


def default_radix_splits(w: Workload, block: int, sms: int) -> int:
    """Programs per row of the radix passes: up to ~16 per SM over all rows (a power of two,
    rounded down), each >= one block, at most 256.

    H200, B=32, dsv32 / dsv41-flash, call us at 512K: 32 programs a row (the old ~4 an SM)
    947.6 / 866.5, 64: 910.2 / 841.2, 128: 903.4 / 840.6, 16: 988.4 / 905.8; the two full
    passes over the logits (digit-0 histogram and pick, ~200 us of the top-k) run their
    histogram ALU work on more SMs at once. With the sampled first digit, 64 against 128 a
    row at B=32: 128K 268.5 / 235.6 vs 279.4 / 246.5, 512K 791.4 / 756.7 vs 798.0 / 762.2:
    hence rounded down (B=32: 66 -> 64, not up to 128)."""
    want = max(1, 16 * sms // (w.batch * w.next_n))
    p = 1
    while p * 2 <= want:
        p *= 2
    return max(1, min(p, next_power_of_2(cdiv(w.context, block)), 256))


PLACE_CHUNK_DEFAULT = 512  # selected keys a program sorts in the chunked placing (PLACE_CHUNK), where it is the default
RADIX_SMALL_BLOCK_ROWS = 32  # rows (batch x next_n) from which the radix passes step 512 keys, not 1024
# RADIX_FIRST "sampled" by default from this many rows and keys. H200, B=32, call us, byte ->
# sampled: dsv32 512K 890.6 -> 799.5 (top-k +41% -> +27%), 128K 291.8 -> 280.0; dsv41-flash
# 512K 833.7 -> 765.3 (+29% -> +18%), 128K 255.8 -> 245.9. Its three extra launches lose
# where the passes are short: B=32 32K 130.8 -> 137.0, B=1 512K 65.4 -> 74.7.
RADIX_SAMPLED_ROWS, RADIX_SAMPLED_CONTEXT = 32, 131072
# Scoring stages of the radix / row paths. The key tile's address hangs on a block-table
# load, and Triton 3.6's pipeliner spends stages on that chain: sm_90 compiles (JIT
# specialisation) keep ONE 8 KB key buffer a program at num_stages 2, 3 and 4 and two at 5
# (6 adds nothing), for 96 -> 107 registers (fp8, next_n 1; 147 -> 161 at next_n 2; mxfp4
# 75-106 -> 92-110), no spills: twice the key bytes in flight a program. H200: the radix
# call at dsv32 B=32 512K 1051 -> 909 us (the logits-writing scoring kernel gains).
RADIX_SCORE_STAGES = 5
# The bound top-k by default for one row (B = 1, next_n = 1) where a group size gives the
# bound kernel 2k..8192 maxima (H200, call us, radix -> bound): dsv32 128K 40.1 -> 24.6,
# 512K 65.7 -> 44.3; dsv41-flash 32K 41.1 -> 29.1, 128K 44.3 -> 25.3, 512K 63.7 -> 47.4.
# Fewer than 2k maxima give a loose bound; at B = 32 128K it showed no gain (dsv41-flash
# 234.5 -> 231.1, dsv32 233.0 -> 588.5 at too few maxima).
BOUND_DEFAULT_MAX_ROWS = 1
BOUND_DEFAULT_MAX_MAXIMA = 8192


def bound_default_group(workload: Workload) -> int:
    """The group size (64, 32 or 16 keys, the largest that fits) giving between 2k and
    ``BOUND_DEFAULT_MAX_MAXIMA`` group maxima a row, where the bound path is the default;
    0 elsewhere (see ``BOUND_DEFAULT_MAX_ROWS``)."""
    w = workload
    k = PROFILES[w.profile]["top_k"]
    if w.batch * w.next_n > BOUND_DEFAULT_MAX_ROWS:
        return 0
    for g in (64, 32, 16):
        if 2 * k <= w.context // g <= BOUND_DEFAULT_MAX_MAXIMA:
            return g
    return 0


def default_config(workload: Workload, target: Target) -> dict[str, Any]:
    """The heuristic config for ``workload`` on ``target`` (complete and canonical there):
    ``row_config`` up to ``ROW_DEFAULT_MAX_CONTEXT`` keys for a top-k of at most
    ``ROW_DEFAULT_MAX_TOPK``, ``bound_config`` for one row where ``bound_default_group``
    finds a group size, ``radix_config`` otherwise (the scoring parameters are the same).

    Why, measured on an H200 (CUDA-graph replay, L2 flushed, scoring + top-k us, radix vs
    row): the radix path's seven launches after the scoring cost ~3-4 us each; the row path
    is one launch, but one program streams a whole row and sorts next_pow2(top_k) keys, and
    the scoring kernel builds a histogram on top. It wins only where rows are short and
    top_k small: dsv41-flash (top_k 512) 8K B=1 41.7 -> 36.2, B=32 59.4 -> 49.5; dsv32
    (top_k 2048) 8K B=1 40.6 -> 60.2, B=32 95.8 -> 94.8, 32K B=32 147.2 -> 134.4 but B=1
    42.8 -> 81.1; dsv41-flash 32K B=1 41.3 -> 56.1, B=32 112.6 -> 121.4; 128K loses 1.2-3.2x."""
    w = workload
    if w.context <= ROW_DEFAULT_MAX_CONTEXT and PROFILES[w.profile]["top_k"] <= ROW_DEFAULT_MAX_TOPK:
        return row_config(w, target)
    return bound_config(w, target) if bound_default_group(w) else radix_config(w, target)


def _gluon_scores(workload: Workload, target: Target) -> bool:
    """The Gluon scoring kernel by default: on sm_90 for one token. H200, scoring launch us,
    Triton -> Gluon: dsv32 B=1 512K 26.8 -> 26.5 (3 stages; 26.3 at 2, 27.6 at 4, 33.0 at
    6), B=1 128K 10.7 -> 9.9 (3), B=32 512K 567.7 -> 554.6 (4); mxfp4 keys (3 stages):
    dsv41-flash B=1 512K 33.9 -> 26.3, B=32 128K 166.1 -> 158.6, 512K 613.1 -> 599.9."""
    cfg = dict(BLOCK_N=64, num_warps=4, num_stages=3)
    prof = PROFILES[workload.profile]
    return workload.next_n == 1 and score_gluon_error(cfg, prof["k_format"], 1, prof["heads"], PAGE, prof["top_k"],
                                                      "radix", target) is None


def radix_config(workload: Workload, target: Target) -> dict[str, Any]:
    """The radix top-k's heuristic: 64-key tiles (one page: one block-table load per tile, the
    wgmma M), splits for ~4 programs an SM (``default_splits``), mxfp4 keys through FP8 MMA
    on the scaled codes decoded a 32-bit word at a time (H200, dsv41-flash B=32: scoring
    1453 -> 910 us at 512K, 369 -> 241 us at 128K against the bytewise decode), then
    row-parallel radix passes over 1024-key blocks (512 from 32 rows) and the placing: six
    passes (8 launches in all), nine with the sampled first digit from
    ``RADIX_SAMPLED_ROWS`` rows at >= ``RADIX_SAMPLED_CONTEXT`` keys."""
    w = workload
    mx = PROFILES[w.profile]["k_format"] == "mxfp4"
    bn = 64
    rows, k = w.batch * w.next_n, PROFILES[w.profile]["top_k"]
    # H200, B=32 with 128 programs a row: 512-key steps beat 1024 at 128K and 512K for both
    # profiles (dsv32 300.3 -> 292.4, 903.4 -> 890.4 us; dsv41-flash 262.5 -> 257.1, 840.6 ->
    # 831.6); fewer rows are unmeasured and keep 1024
    tb = 512 if rows >= RADIX_SMALL_BLOCK_ROWS else 1024
    # Ranking costs rows * k^2 compares spread over the GPU; from 8 rows of dsv32's 2048 the
    # chunked placing wins (sorted 512-key chunks, then ranks across them). H200, call us, one
    # tl.sort a row -> PLACE_CHUNK 512: dsv32 B=32 8K 86.0 -> 50.2, 128K 279.5 -> 244.0, 512K
    # 793.8 -> 764.3; B=8 8K 87.1 -> 42.4 (256-key chunks). Below that the ranking stays (B=1:
    # 34.3 vs 37.3 at 8K, 65.9 vs 68.8 at 512K; dsv41-flash B=32 128K 248.4 vs 248.3 with
    # 128-key chunks).
    chunked = rows * k * k >= 8 * 2048 * 2048  # dsv41-flash (k = 512) from 128 rows: 128-key chunks (unmeasured)
    rank_block = max(16, min(128, next_power_of_2(cdiv(rows * k, 2 * target.sms)), next_power_of_2(k)))
    gluon = _gluon_scores(w, target)
    first = "sampled" if rows >= RADIX_SAMPLED_ROWS and w.context >= RADIX_SAMPLED_CONTEXT else "byte"
    # SCORE_SAMPLE (the Gluon scoring builds the sampled digit-0 histogram, one launch fewer) for fp8 keys;
    # H200, B32 whole calls: dsv32 128K 211.4 -> 207.1 us, 512K 677.3 -> 666.5; the mxfp4 kernel,
    # instruction-bound, loses (+24 SASS instructions: dsv41-flash 201.9 -> 209.0, 647.4 -> 682.8)
    sample = gluon and not mx and first == "sampled"
    return {"BLOCK_N": bn, "NUM_SPLITS": default_splits(w, bn, target.sms), "MX_FP8_DOT": mx, "MX_WORD_DECODE": mx,
            "TOPK_ALGO": "radix", "TOPK_BLOCK": tb, "TOPK_SPLITS": default_radix_splits(w, tb, target.sms),
            "RANK_BLOCK": 64 if chunked else rank_block,
            "PLACE_CHUNK": min(PLACE_CHUNK_DEFAULT, next_power_of_2(k) // 4) if chunked else 0,
            "RADIX_FIRST": first, "BOUND_GROUP": 64, "RANK_STEP": 2048, "LAUNCH_PDL": False, "SCORE_MAXNREG": 0,
            "SCORE_GLUON": gluon, "SCORE_SAMPLE": sample,
            "num_warps": 4, "num_stages": (3 if rows == 1 or mx else 4) if gluon else RADIX_SCORE_STAGES}


def row_config(workload: Workload, target: Target) -> dict[str, Any]:
    """``radix_config``'s scoring parameters with the row top-k (``TOPK_ALGO="row"``):
    2048-key streaming blocks (8 a thread at ``launcher.ROW_WARPS``; ~2 warp instructions a
    key whatever the block, sm_90 SASS), the Triton scoring kernel (the Gluon one scores
    for the radix / bound paths only)."""
    c = radix_config(workload, target)
    return dict(c, NUM_SPLITS=min(c["NUM_SPLITS"], ROW_DEFAULT_MAX_SPLITS), TOPK_ALGO="row", TOPK_BLOCK=2048,
                TOPK_SPLITS=1, RANK_BLOCK=64, PLACE_CHUNK=0, RADIX_FIRST="byte", SCORE_SAMPLE=False,
                SCORE_GLUON=False, num_stages=RADIX_SCORE_STAGES)


def bound_config(workload: Workload, target: Target) -> dict[str, Any]:
    """``radix_config``'s scoring with the bound top-k (``TOPK_ALGO="bound"``): the scoring
    kernel also writes the max of every BOUND_GROUP keys (``bound_default_group``'s size
    where it finds one, else one group a tile), one launch derives a bound of each row's k-th
    score from them in parts, one filters the row at it and one ranks the few keys above it:
    four launches in all, where the radix path takes eight or more."""
    c = radix_config(workload, target)
    # one filter step a program (H200, dsv32 B=1 512K: 2048-key steps 46.7 -> 44.4 us), 8192
    # compares a ranking step (place 6.5 -> 5.3 us) and PDL launches (1-2.5 us less at B=1
    # 128K-512K; sm_90+)
    tb = max(c["TOPK_BLOCK"], min(2048, next_power_of_2(cdiv(workload.context, c["TOPK_SPLITS"]))))
    return dict(c, TOPK_ALGO="bound", BOUND_GROUP=bound_default_group(workload) or c["BLOCK_N"], RADIX_FIRST="byte",
                SCORE_SAMPLE=False, PLACE_CHUNK=0, TOPK_BLOCK=tb, RANK_STEP=8192,
                LAUNCH_PDL=target.cc >= 90 and not target.interpret)


def cost(workload: Workload) -> tuple[float, float]:
    """The floor: ``B*N*b_k`` bytes (indices only), ``2*B*next_n*H*128*N`` flops."""
    w = workload
    prof = PROFILES[w.profile]
    nbytes = w.batch * w.context * BYTES_PER_KEY[prof["k_format"]]
    flops = 2 * w.batch * w.next_n * prof["heads"] * D_INDEX * w.context
    return float(nbytes), float(flops)


def memory_bytes(workload: Workload, config: dict[str, Any] | None = None) -> int:
    """Device memory of the inputs, the top-k scratch and the outputs (no baseline)."""
    w = workload
    prof = PROFILES[w.profile]
    cfg = config or {"TOPK_ALGO": "radix"}  # the path with the most scratch
    rows = w.batch * cdiv(w.context, PAGE) * PAGE
    p2 = next_power_of_2(prof["top_k"])
    if _algo(cfg) == "radix":  # scores (4 B) + two candidate buffers (8 B each) per row and key
        scratch = w.batch * w.next_n * (rows // w.batch * 20 + p2 * 8 + 4 * int(_RS.value))
    elif _algo(cfg) == "bound":  # scores (4 B) + one candidate buffer (8 B) per row and key, the group maxima
        n = rows // w.batch
        scratch = w.batch * w.next_n * (n * 12 + cdiv(n, cfg["BOUND_GROUP"]) * 4 + 4 * int(_RS.value))
    else:  # row: scores (4 B) + one candidate buffer (8 B) per row and key
        scratch = w.batch * w.next_n * (rows // w.batch * 12 + p2 * 8 + 1024 * cfg["NUM_SPLITS"])
    return rows * BYTES_PER_KEY[prof["k_format"]] + scratch + 2 * w.batch * w.next_n * p2 * 8


def feasible(workload: Workload, budget_bytes: int | None = None) -> str | None:
    """None when the workload, its float64 reference (one sequence at a time) and the
    chunked baseline's logits fit in 70% of the device memory (141 GB without a GPU)."""
    if budget_bytes is None:
        total = 141 * 10**9
        if not Target.of().interpret:
            total = torch.cuda.get_device_properties(0).total_memory
        budget_bytes = int(0.7 * total)
    w = workload
    H = PROFILES[w.profile]["heads"]
    ref = w.context * (D_INDEX * 8 + w.next_n * H * 8 * 2)  # one sequence's keys and dots in float64
    baseline = w.batch * w.next_n * w.context * 4 * 2
    need = memory_bytes(w) + ref + baseline
    if need > budget_bytes:
        return f"needs {need / 1e9:.1f} GB of device memory, budget {budget_bytes / 1e9:.1f} GB"
    return None


def mqa_topk(q: torch.Tensor, weights: torch.Tensor, k_cache: torch.Tensor, k_scales: torch.Tensor,
             block_table: torch.Tensor, seq_lens: torch.Tensor, *, top_k: int, k_format: str = "fp8",
             return_logits: bool = False, config: dict[str, Any] | None = None
             ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Lightning-indexer scores and their exact top-k: ``topk_idx [B, next_n, top_k] int32``.

    ``q [B, next_n, H, 128] float8_e4m3fn``, ``weights [B, next_n, H] fp32``; ``fp8``:
    ``k_cache [pages, PAGE, 128] float8_e4m3fn`` + ``k_scales [pages, PAGE] fp32``;
    ``mxfp4``: ``k_cache [pages, PAGE, 64] uint8`` + ``k_scales [pages, PAGE, 4] uint8``
    (UE8M0); ``block_table [B, max_pages] int32``, ``seq_lens [B] int32``. Indices sorted by
    descending score (ties: lower index first), -1 past the visible keys. With
    ``return_logits`` also ``[B, next_n, max_pages * PAGE] fp32`` (-inf where not seen).
    ``config=None`` picks the active pack's config (nearest profile by heads / top-k / format).
    """
    _validate(q, weights, k_cache, k_scales, block_table, seq_lens, top_k, k_format)  # before the shapes are read
    if config is None:
        B, T, H, _ = q.shape
        prof = next((p for p, v in PROFILES.items() if v["heads"] == H and v["top_k"] == top_k
                     and v["k_format"] == k_format), None)
        if prof is None:  # not a known profile: the one of the same key format
            prof = next(p for p, v in PROFILES.items() if v["k_format"] == k_format) if k_format in K_FORMATS \
                else "dsv32"
        wl = Workload(batch=B, context=int(block_table.shape[1]) * int(k_cache.shape[1]), next_n=T, profile=prof)
        config = runtime.select("sparse_mqa", _wdict(wl), Target.of(q.device)).config
    return launch(config=config, q=q, weights=weights, k_cache=k_cache, k_scales=k_scales, block_table=block_table,
                  seq_lens=seq_lens, top_k=top_k, k_format=k_format, return_logits=return_logits)


baselines = {"torch_eager": torch_eager}


def verify(out: Any, ref: Any, inputs: dict[str, Any]) -> None:
    """Indices: exactly the reference's, or (where rounding reorders near-equal scores) a
    valid top-k: the same -1 padding, distinct visible keys in non-increasing score order
    whose scores match the reference's rank by rank within ``tol * max|score|`` of the
    row. Logits: ``|out - ref| <= 2 * tol * max|ref|`` of the row.

    ``tol`` is 1e-5 where the MMA accumulates in full fp32 (the interpreter) and 2^-10 on a
    GPU: Hopper's FP8 tensor cores keep ~14 bits while accumulating (DeepSeek-V3 report,
    sec. 3.3.2); the H200 gave logits 1.5-1.7e-4 of the row max off the float64 reference
    (dsv32, fp8 keys) and 2.1-2.6e-5 (mxfp4) while the indices were exactly the top-k of
    the kernel's own logits (benchmarks/sparse_mqa_debug.py)."""
    tol = 1e-5 if inputs["q"].device.type == "cpu" else 2.0 ** -10
    if inputs.get("return_logits"):
        idx, logits = out
        ridx, rlogits = ref
        fin = torch.isfinite(rlogits)
        scale = torch.where(fin, rlogits.abs(), torch.zeros_like(rlogits)).amax(-1, keepdim=True).clamp(min=1e-30)
        if logits.dtype != torch.float32:
            raise AssertionError(f"logits: dtype {logits.dtype}, want torch.float32")
        same_inf = torch.isinf(logits) & (logits == rlogits)  # -inf where not seen: equal, and no inf*0 bounds
        assert_close("logits", torch.where(same_inf, 0.0, logits / scale), torch.where(same_inf, 0.0, rlogits / scale),
                     atol=2 * tol)
    else:
        idx, ridx = out, ref
    if idx.dtype != torch.int32 or idx.shape != ridx.shape:
        raise AssertionError(f"topk_idx: {idx.dtype} {tuple(idx.shape)}, want torch.int32 {tuple(ridx.shape)}")
    idx, ridx = idx.cpu(), ridx.cpu()
    if torch.equal(idx, ridx):
        return
    if not torch.equal(idx >= 0, ridx >= 0):
        bad = (idx >= 0) != (ridx >= 0)
        raise AssertionError(f"topk_idx: -1 padding differs at {bad.nonzero()[:3].tolist()}")
    vis = visible(inputs["seq_lens"], idx.shape[1]).cpu()
    rows = (idx != ridx).any(-1).nonzero().tolist()
    for b, t in rows:
        m = idx[b, t] >= 0
        o, r = idx[b, t][m], ridx[b, t][m]
        if o.unique().numel() != o.numel() or int(o.min()) < 0 or int(o.max()) >= int(vis[b, t]):
            raise AssertionError(f"topk_idx[{b}, {t}]: indices repeat or are not visible keys")
        dev = inputs["q"].device
        so, sr = scores_at(inputs, b, t, o.to(dev)).cpu(), scores_at(inputs, b, t, r.to(dev)).cpu()
        tol_row = tol * float(sr.abs().max()) + 1e-30
        if (so[1:] - so[:-1] > tol_row).any():
            raise AssertionError(f"topk_idx[{b}, {t}]: not in descending score order")
        if ((so - sr).abs() > tol_row).any():
            j = int(((so - sr).abs() > tol_row).nonzero()[0])
            raise AssertionError(f"topk_idx[{b}, {t}] rank {j}: key {int(o[j])} scores {float(so[j]):.6g}, "
                                 f"reference key {int(r[j])} scores {float(sr[j]):.6g}")


def _plan_for(workload: Workload, config: dict[str, Any], target: Target) -> list[tuple[Any, tuple, dict[str, Any]]]:
    """``_plan`` on ``target`` of this workload's full-length inputs on meta tensors (no memory, no device)."""
    w = workload
    prof = PROFILES[w.profile]
    B, T, H, D, fmt = w.batch, w.next_n, prof["heads"], D_INDEX, prof["k_format"]
    m = lambda *s, dt=torch.float32: torch.empty(*s, dtype=dt, device="meta")  # noqa: E731
    pages = B * cdiv(w.context, PAGE)
    if fmt == "fp8":
        kc, ks = m(pages, PAGE, D, dt=torch.float8_e4m3fn), m(pages, PAGE)
    else:
        kc, ks = m(pages, PAGE, D // 2, dt=torch.uint8), m(pages, PAGE, D // 32, dt=torch.uint8)
    bufs = _buffers(B, T, (pages // B) * PAGE, prof["top_k"], False, config, "meta",
                    alloc=lambda shape, dtype, fill=None: m(*shape, dt=dtype))
    return _plan(m(B, T, H, D, dt=torch.float8_e4m3fn), m(B, T, H), kc, ks, m(B, pages // B, dt=torch.int32),
                 m(B, dt=torch.int32), prof["top_k"], fmt, False, config, bufs, target)


def lower_signatures(workload: Workload, config: dict[str, Any], target: Target
                     ) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    """Each launch ``launch`` does for this workload/config on ``target``: (jit fn, signature, constexprs).

    Needs ``TRITON_INTERPRET`` unset (under the interpreter the kernels are not compilable).
    """
    return [(kern, *lowering.signature(kern, args)) for kern, _grid, args in _plan_for(workload, config, target)]


runtime.register_defaults("sparse_mqa", lambda wd, target: default_config(Workload(**wd), target))
runtime.register_check("sparse_mqa", lambda c: check_knobs("sparse_mqa", c, KNOBS))

SPEC = KernelSpec(
    name="sparse_mqa",
    workload=Workload,
    make_inputs=make_inputs,
    reference=reference,
    launch=launch,
    default_config=default_config,
    cost=cost,
    verify=verify,
    baselines=baselines,
    launch_bound=True,
    description="Sparse MQA indexer: FP8 / MXFP4 paged-key scoring and exact top-k (radix, row or bound select)",
)
