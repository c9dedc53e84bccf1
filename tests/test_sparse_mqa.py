"""Sparse MQA indexer: indices (and logits) equal the reference through the interpreter for
both key formats, ragged and short sequences, next_n = 2 causality, exact ties, both top-k
paths (merge: prunes, shared thresholds, merge levels; radix: row-parallel digit passes,
a launch each or all in one launch with row barriers (``RADIX_FUSED``), ranking or sorting,
ties at the k-th score, the degenerate-ties fallback; row: one program
per row, first-digit end bins, ties, rows past one streaming block); verify's
tolerance; the baseline; the search space; lowering for sm_90 (default configs within
shared memory, FP8 wgmma, 16-byte key loads, no spills in the radix kernels) / sm_100."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_templates import sparse_mqa as M
from search_spaces import sparse_mqa as S
from tuner.verify import assert_equal
from conftest import run_clean

ROOT = Path(__file__).resolve().parents[1]


def ragged_inputs(profile: str, next_n: int, seq_lens: list[int], *, top_k: int, context: int | None = None,
                  device: str = "cpu", seed: int = 0, logits: bool = False) -> dict:
    ctx = context or max(max(seq_lens), 1)
    inp = M.make_inputs(M.Workload(len(seq_lens), ctx, next_n, profile), device, seed)
    inp.update(seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device), top_k=top_k, return_logits=logits)
    return inp


def min_gap(ref_logits: torch.Tensor, ref_idx: torch.Tensor) -> float:
    """Smallest relative gap between consecutive selected scores (random data: no near ties)."""
    gaps = []
    for b in range(ref_idx.shape[0]):
        for t in range(ref_idx.shape[1]):
            i = ref_idx[b, t][ref_idx[b, t] >= 0].long()
            if i.numel() > 1:
                s = ref_logits[b, t][i].double()
                gaps.append(float((s[:-1] - s[1:]).min() / s.abs().max()))
    return min(gaps) if gaps else 1.0


def check_exact(inp: dict, config: dict) -> None:
    """The indices are exactly the top-k of the kernel's own logits on any device (immune
    to the MMA's rounding); the run without logits (another compile) gives the same; on
    the CPU (fp32 accumulation) they also equal the float64 reference's; ``verify``
    (tolerance for the device's MMA) passes."""
    want_logits = inp["return_logits"]
    idx, logits = M.launch(config=config, **dict(inp, return_logits=True))
    ref = M.reference(**dict(inp, return_logits=True))
    assert idx.dtype == torch.int32 and idx.shape == ref[0].shape
    assert_equal("topk_idx vs own logits", idx, M.topk_of_logits(logits, inp["top_k"]))
    if not want_logits:
        assert_equal("topk_idx without logits", M.launch(config=config, **inp), idx)
    if idx.device.type == "cpu":
        assert min_gap(ref[1], ref[0]) > 1e-6, "inputs with near-ties: pick another seed"
        assert_equal("topk_idx", idx, ref[0])
    M.verify((idx, logits) if want_logits else idx, ref if want_logits else ref[0], inp)


def cfg(profile: str, next_n: int = 1, **over) -> dict:
    """The merge path (the cases below set its knobs)."""
    return dict(M.merge_config(M.Workload(2, 4096, next_n, profile)), **over)


def rcfg(profile: str, next_n: int = 1, **over) -> dict:
    """The radix path with interpreter-sized blocks (256-key steps, 2 programs a row), a
    launch a pass (``RADIX_FUSED=True``: all passes in one launch, one program a row here)."""
    c = dict(M.radix_config(M.Workload(2, 4096, next_n, profile)), TOPK_BLOCK=256, TOPK_SPLITS=2, RANK_BLOCK=16,
             RADIX_FUSED=False)
    return dict(c, **over)


def bcfg(profile: str, next_n: int = 1, **over) -> dict:
    """The bound path with interpreter-sized blocks (256-key steps, 2 programs a row)."""
    c = dict(M.bound_config(M.Workload(2, 4096, next_n, profile)), TOPK_BLOCK=256, TOPK_SPLITS=2, RANK_BLOCK=16)
    return dict(c, **over)


def rowcfg(profile: str, next_n: int = 1, **over) -> dict:
    """The row path with 128-key streaming blocks."""
    return dict(M.row_config(M.Workload(2, 4096, next_n, profile)), **{"TOPK_BLOCK": 128, **over})


CASES = [
    # profile, next_n, seq_lens, top_k, config overrides
    ("dsv32", 1, [300, 37, 130], 40, dict(BLOCK_N=32, NUM_SPLITS=4, MERGE_GROUP=2, SELECT_BLOCK=256,
                                                 SHARE_THRESHOLD=True)),
    ("dsv32", 2, [700, 1, 0], 50, dict(BLOCK_N=16, NUM_SPLITS=2, MERGE_GROUP=2, CAND_MULT=2,
                                             SHARE_THRESHOLD=True)),  # prunes, tiny seqs
    ("dsv32", 2, [900, 450], 33, dict(BLOCK_N=64, NUM_SPLITS=8, MERGE_GROUP=2, SHARE_THRESHOLD=False)),  # 3 levels
    ("dsv41-flash", 1, [600, 20], 64, dict(BLOCK_N=128, NUM_SPLITS=1, MX_FP8_DOT=True)),  # tiles of 2 pages
    ("dsv41-flash", 2, [520, 333], 100, dict(BLOCK_N=32, NUM_SPLITS=3, MERGE_GROUP=4, MX_FP8_DOT=True, CAND_MULT=4,
                                                       SHARE_THRESHOLD=True)),
    ("dsv41-flash", 2, [400, 64], 16, dict(BLOCK_N=64, NUM_SPLITS=2, MERGE_GROUP=2, MX_FP8_DOT=False, MX_WORD_DECODE=False)),
]


@pytest.mark.parametrize("profile, next_n, seqs, top_k, over", CASES)
def test_indices_equal_reference(profile, next_n, seqs, top_k, over, device):
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, device=device, logits=next_n == 2)
    check_exact(inp, cfg(profile, next_n, **over))


RADIX_CASES = [
    # profile, next_n, seq_lens, top_k, config overrides
    ("dsv32", 1, [300, 37, 130], 40, dict(BLOCK_N=32, NUM_SPLITS=4)),  # a row shorter than top_k
    ("dsv32", 2, [700, 1, 0], 50, dict(BLOCK_N=16, NUM_SPLITS=2, TOPK_SPLITS=4, PLACE_SORT=True)),
    ("dsv32", 2, [900, 450], 33, dict(NUM_SPLITS=8, TOPK_SPLITS=8, RANK_BLOCK=32)),  # blocks split over programs
    ("dsv41-flash", 1, [600, 20], 64, dict(BLOCK_N=128, NUM_SPLITS=1, TOPK_SPLITS=1, TOPK_BLOCK=512)),
    ("dsv41-flash", 2, [520, 333], 100, dict(BLOCK_N=32, NUM_SPLITS=3, MX_FP8_DOT=True, PLACE_SORT=True)),
    ("dsv41-flash", 2, [400, 64, 3], 16, dict(NUM_SPLITS=2, MX_FP8_DOT=False, MX_WORD_DECODE=False, RANK_BLOCK=64)),
    ("dsv41-flash", 2, [520, 333], 100, dict(BLOCK_N=32, NUM_SPLITS=3, MX_FP8_DOT=True, MX_WORD_DECODE=True)),
    ("dsv41-flash", 1, [600, 20, 129], 64, dict(BLOCK_N=128, NUM_SPLITS=2, MX_FP8_DOT=True, MX_WORD_DECODE=True)),
    # the quarter-binade first digit (five digit passes)
    ("dsv32", 1, [300, 37, 130], 40, dict(BLOCK_N=32, NUM_SPLITS=4, RADIX_FIRST="quarter")),
    ("dsv32", 2, [900, 450], 33, dict(NUM_SPLITS=8, TOPK_SPLITS=8, RANK_BLOCK=32, RADIX_FIRST="quarter")),
    ("dsv41-flash", 2, [520, 333], 100, dict(BLOCK_N=32, NUM_SPLITS=3, PLACE_SORT=True, RADIX_FIRST="quarter")),
    # the sampled first digit (every 16th key): rows long enough for a threshold, rows whose
    # sample is too small (all keys kept), a row shorter than top_k (the fallback pass)
    ("dsv32", 1, [1900, 37, 700], 40, dict(NUM_SPLITS=4, TOPK_SPLITS=4, RADIX_FIRST="sampled")),
    ("dsv32", 2, [900, 450], 33, dict(NUM_SPLITS=8, TOPK_SPLITS=8, RANK_BLOCK=32, RADIX_FIRST="sampled")),
    ("dsv41-flash", 2, [1500, 333], 20, dict(BLOCK_N=32, NUM_SPLITS=3, PLACE_SORT=True, RADIX_FIRST="sampled")),
    # the chunked placing: sorted chunks of 16 / 32 selected keys (3-4 of them, the last
    # partial), ranked across by binary search; rows shorter than top_k leave chunks empty
    ("dsv32", 1, [300, 37, 130], 40, dict(BLOCK_N=32, NUM_SPLITS=4, PLACE_CHUNK=16)),
    ("dsv32", 2, [900, 450], 33, dict(NUM_SPLITS=8, TOPK_SPLITS=8, PLACE_CHUNK=16, RADIX_FIRST="quarter")),
    ("dsv41-flash", 2, [1200, 333, 5], 100, dict(BLOCK_N=32, NUM_SPLITS=3, PLACE_CHUNK=32, RADIX_FIRST="sampled")),
]


@pytest.mark.parametrize("profile, next_n, seqs, top_k, over", RADIX_CASES)
def test_radix_indices_equal_reference(profile, next_n, seqs, top_k, over, device):
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, device=device, logits=next_n == 2)
    check_exact(inp, rcfg(profile, next_n, **over))


ROW_CASES = [
    # profile, next_n, seq_lens, top_k, config overrides
    ("dsv32", 1, [300, 37, 130, 0], 40, dict(BLOCK_N=32, NUM_SPLITS=4)),  # shorter than top_k, empty
    ("dsv32", 2, [700, 1, 0], 50, dict(BLOCK_N=16, NUM_SPLITS=3)),  # 6 blocks, 3 splits' histograms
    ("dsv32", 2, [900, 450], 33, dict(NUM_SPLITS=8, TOPK_BLOCK=256)),
    ("dsv41-flash", 1, [600, 20, 129], 64, dict(BLOCK_N=128, NUM_SPLITS=1)),
    ("dsv41-flash", 2, [520, 333, 3], 100, dict(BLOCK_N=32, NUM_SPLITS=3, MX_WORD_DECODE=False)),
    ("dsv41-flash", 2, [400, 64], 16, dict(NUM_SPLITS=2, MX_FP8_DOT=False, MX_WORD_DECODE=False)),
    # the selection sorted by the chunked placing launches (chunks of 16 / 32), not one sort a row
    ("dsv32", 1, [300, 37, 130, 0], 40, dict(BLOCK_N=32, NUM_SPLITS=4, PLACE_CHUNK=16)),
    ("dsv41-flash", 2, [520, 333, 3], 100, dict(BLOCK_N=32, NUM_SPLITS=3, PLACE_CHUNK=32)),
]


FUSED_CASES = [
    # profile, next_n, seq_lens, top_k, config overrides: each first digit, rows shorter than
    # top_k (37, 5), next_n = 2, every placing (ranking, one sort a row, sorted chunks)
    ("dsv32", 1, [300, 37, 130], 40, dict(BLOCK_N=32, NUM_SPLITS=4)),
    ("dsv32", 2, [900, 450], 33, dict(NUM_SPLITS=8, RADIX_FIRST="quarter", PLACE_CHUNK=16)),
    ("dsv32", 1, [1900, 37, 700], 40, dict(NUM_SPLITS=4, RADIX_FIRST="sampled")),
    ("dsv41-flash", 2, [800, 200, 5], 60, dict(BLOCK_N=32, NUM_SPLITS=3, PLACE_CHUNK=32, RADIX_FIRST="sampled")),
    ("dsv41-flash", 2, [520, 33], 50, dict(BLOCK_N=32, NUM_SPLITS=3, PLACE_SORT=True, RADIX_FIRST="quarter")),
]


@pytest.mark.parametrize("profile, next_n, seqs, top_k, over", FUSED_CASES)
def test_radix_fused_equals_the_launch_a_pass_path(profile, next_n, seqs, top_k, over, device):
    """``RADIX_FUSED``: every radix pass in one launch (one program a row under the
    interpreter: the same steps in the same order, barriers that never wait) gives exactly
    the indices of a launch a pass and of the reference."""
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, device=device, logits=next_n == 2)
    fused = rcfg(profile, next_n, **over, RADIX_FUSED=True)
    assert [f.__name__ for f, _, _ in M._plan_for(M.Workload(2, 4096, next_n, profile), fused)][1] == \
        "_radix_fused_kernel"
    check_exact(inp, fused)
    inp = dict(inp, return_logits=False)
    assert_equal("fused vs a launch a pass", M.launch(config=fused, **inp),
                 M.launch(config=rcfg(profile, next_n, **over), **inp))


@pytest.mark.parametrize("profile, next_n, seqs, top_k, over", ROW_CASES)
def test_row_indices_equal_reference(profile, next_n, seqs, top_k, over, device):
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, device=device, logits=next_n == 2)
    check_exact(inp, rowcfg(profile, next_n, **over))


BOUND_CASES = [
    # profile, next_n, seq_lens, top_k, config overrides: groups of 8-64 keys (rows with more
    # groups than k: a bound; fewer: every key a candidate, past 2 x next_pow2(k) of them the
    # one-program selection), rows shorter than top_k and empty, next_n = 2, ranking blocks
    # of 16-64 positions, both formats
    ("dsv32", 1, [300, 37, 130, 0], 40, dict(BLOCK_N=32, NUM_SPLITS=4, BOUND_GROUP=8)),
    ("dsv32", 2, [900, 450], 33, dict(NUM_SPLITS=8, TOPK_SPLITS=8, BOUND_GROUP=16, RANK_BLOCK=32)),
    ("dsv32", 1, [2000, 700], 10, dict(NUM_SPLITS=4, TOPK_SPLITS=4)),  # 64-key groups, 4 programs a row
    ("dsv41-flash", 2, [1200, 333, 5], 20, dict(BLOCK_N=32, NUM_SPLITS=3, BOUND_GROUP=32, RANK_BLOCK=64)),
    ("dsv41-flash", 1, [600, 20, 129], 64, dict(BLOCK_N=128, NUM_SPLITS=2, BOUND_GROUP=16, TOPK_SPLITS=3)),
    ("dsv41-flash", 2, [400, 64], 16, dict(NUM_SPLITS=2, MX_FP8_DOT=False, MX_WORD_DECODE=False, BOUND_GROUP=8)),
]


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("profile, next_n, seqs, top_k, over", BOUND_CASES)
def test_bound_indices_equal_reference(profile, next_n, seqs, top_k, over, fused, device):
    """Each case with the bound in its own launch and derived by every filter program
    (``BOUND_FUSED``), the ranking in default and 4x steps (``RANK_STEP``)."""
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, device=device, logits=next_n == 2)
    check_exact(inp, bcfg(profile, next_n, **over, BOUND_FUSED=fused, RANK_STEP=8192 if fused else 2048))


@pytest.mark.parametrize("case", [BOUND_CASES[0], BOUND_CASES[1], BOUND_CASES[3]])
def test_bound_in_parts(case, device, monkeypatch):
    """The bound launch in parts (``bound_parts``: here 8 maxima a part, so 2-16 parts a
    row, some empty on short rows): each part bounds its ceil(k * n_p / ng)-th largest max,
    the filter takes the least, and the indices stay exact."""
    profile, next_n, seqs, top_k, over = case
    monkeypatch.setattr(M, "BOUND_PART_MAXIMA", 8)
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, device=device, logits=next_n == 2)
    c = bcfg(profile, next_n, **over)
    assert M.bound_parts(max(seqs), c["BOUND_GROUP"]) > 1
    check_exact(inp, c)


@triton.jit
def _digit_floor_probe(o_ptr, out_ptr, d, N: tl.constexpr):
    o = tl.load(o_ptr + tl.arange(0, N)).to(tl.uint32, bitcast=True)
    agree = (M._row_digit(o) >= d) == (o.to(tl.int64) >= M._row_digit_floor(d))
    tl.store(out_ptr + tl.arange(0, N), agree.to(tl.int32))


def test_row_digit_floor_is_the_digit_test():
    """The lean filter's threshold: ``o >= _row_digit_floor(d)`` iff ``_row_digit(o) >= d`` for every
    digit (-1 and 0: every key; 255: the catch-all top bin) over order bits of every magnitude,
    each bin's edges included."""
    g = torch.Generator().manual_seed(3)
    c = 1024 + 4 * int(M._ROW_EXP_LO.value) - 1
    edges = torch.tensor([(b + c) << 21 for b in range(256)], dtype=torch.int64)
    o = torch.cat([torch.randint(0, 2**32, (3328,), generator=g, dtype=torch.int64), edges, edges - 1,
                   torch.tensor([0, 2**32 - 1, 2**31, 2**31 - 1] * 64, dtype=torch.int64)])
    o32 = torch.where(o >= 2**31, o - 2**32, o).to(torch.int32)[:4096]
    out = torch.empty(4096, dtype=torch.int32)
    for d in (-1, 0, 1, 2, 100, 157, 254, 255):
        _digit_floor_probe[(1,)](o32, out, d, N=4096)
        assert bool(out.all()), d


@triton.jit
def _filter_probe(src_ptr, dst_ptr, cnt_ptr, max_len, start, end, theta, BLOCK: tl.constexpr):
    x = M._filter_first(src_ptr, max_len, start, BLOCK)
    M._filter_logits(src_ptr, max_len, start, end, theta, dst_ptr, cnt_ptr, x, BLOCK)


@pytest.mark.parametrize("block", [32, 256])
@pytest.mark.parametrize("max_len, start, end, theta_q", [(1000, 0, 1000, 0.9), (1000, 512, 997, 0.5),
                                                          (4096, 1024, 3001, 0.99), (700, 0, 700, None),
                                                          (1000, 0, 613, None), (1024, 768, 700, None)])
def test_filter_logits_appends_exactly_the_kept_keys(max_len, start, end, theta_q, block):
    """``_filter_logits`` (the radix MODE 2 and bound filters): the keys of ``src[start:end]`` at or
    above theta, each once, whatever the row's length (the loads run to ``max_len``, the test to
    ``end``: scores past ``end`` are never appended, even above theta), with -1 for every score, and
    nothing for a program whose chunk starts past the row's end."""
    g = torch.Generator().manual_seed(max_len + start)
    src = torch.randn(max_len, generator=g)
    src[end:] = 1e9  # past the visible keys: above any theta, never kept
    if theta_q is None:
        theta = -1
    else:
        o = src.view(torch.int32).to(torch.int64)
        ob = torch.where(o < 0, ~o & 0xFFFFFFFF, o | 0x80000000)
        theta = int(torch.quantile(ob[start:end].double(), theta_q).item())
    dst = torch.full((max_len,), -7, dtype=torch.int64)
    cnt = torch.zeros(1, dtype=torch.int32)
    _filter_probe[(1,)](src, dst, cnt, max_len, start, end, theta, BLOCK=block)
    n = int(cnt.item())
    keys = sorted(dst[:n].tolist())
    idx = [2147483647 - (k & 2147483647) for k in keys]
    vis = src[start:end]
    o = vis.view(torch.int32).to(torch.int64)
    ob = torch.where(o < 0, ~o & 0xFFFFFFFF, o | 0x80000000)
    want = [start + j for j in range(end - start) if theta < 0 or int(ob[j]) >= theta]
    assert sorted(idx) == want
    assert all(k >> 31 == int(ob[i - start]) for k, i in zip(keys, idx))
    assert (dst[n:] == -7).all()


@triton.jit
def _group_bound_probe(x_ptr, out_ptr, n, want, GMAX_BLOCK: tl.constexpr, ONE_LOAD: tl.constexpr):
    thr, ok = M._group_bound(x_ptr, n, want, GMAX_BLOCK, ONE_LOAD)
    tl.store(out_ptr, thr)
    tl.store(out_ptr + 1, ok.to(tl.float32))


def _group_bound(x: torch.Tensor, want: int, block: int, one_load: bool) -> tuple[float, bool]:
    out = torch.empty(2, dtype=torch.float32)
    _group_bound_probe[(1,)](x, out, x.numel(), want, GMAX_BLOCK=block, ONE_LOAD=one_load)
    return float(out[0]), bool(out[1])


@pytest.mark.parametrize("block, one_load", [(64, False), (1024, False), (1024, True)])
@pytest.mark.parametrize("kind", ["normal", "outlier", "two_values", "equal", "tiny_range", "huge", "negative"])
def test_group_bound_at_least_want_and_tight(kind, block, one_load):
    """``_group_bound`` (the bound path's three nested 16-bin histograms) over 1000 maxima:
    a value of the input with at least ``want`` maxima at or above it, whatever the spread
    (one outlier 1e6x the rest, two values only, all equal, a range of a few ulps, values
    near the float max, all negative), in many blocks, in one block reloaded at every pass,
    and held in registers (``ONE_LOAD``: the same bound as the looped form); on spread
    values within a few % of the exact want-th largest; an infinite range: no bound."""
    g = torch.Generator().manual_seed(5)
    x = {"normal": torch.randn(1000, generator=g),
         "outlier": torch.cat([torch.randn(999, generator=g), torch.tensor([1e6])]),
         "two_values": torch.randint(0, 2, (1000,), generator=g).float(),
         "equal": torch.full((1000,), 0.75),
         "tiny_range": 1.0 + torch.randint(0, 4, (1000,), generator=g).float() * 2**-23,
         "huge": 3e38 * torch.rand(1000, generator=g),
         "negative": -torch.rand(1000, generator=g) - 1}[kind].float()
    for want in (1, 37, 250, 1000):
        thr, ok = _group_bound(x, want, block, one_load)
        assert ok and thr in x.tolist(), (kind, want, thr)
        if one_load:
            assert thr == _group_bound(x, want, 64, False)[0], (kind, want)
        above = int((x >= thr).sum())
        assert above >= want, (kind, want, above)
        if kind in ("normal", "outlier"):  # 4096 bins in effect; 256 over the spread past an outlier
            assert above <= want + 3 + want // 20, (kind, want, above)
    _, ok = _group_bound(torch.cat([torch.randn(99, generator=g), torch.tensor([float("inf")])]), 10, block, one_load)
    assert not ok


def test_bound_filters_to_few_candidates(device):
    """The bound (a lower bound of the k-th largest 16-key group max, ``_group_bound``) keeps
    few keys besides the top-k on random scores (each group max a distinct key at or above
    it, so never fewer than k); a row of at most k keys keeps all."""
    inp = ragged_inputs("dsv32", 1, [2000, 700, 5], top_k=10, device=device)
    c = bcfg("dsv32", 1, NUM_SPLITS=4, TOPK_SPLITS=4, BOUND_GROUP=16)
    max_len = inp["block_table"].shape[1] * inp["k_cache"].shape[1]
    bufs = M._buffers(3, 1, max_len, 10, False, c, device)
    plan = M._plan(inp["q"], inp["weights"], inp["k_cache"], inp["k_scales"], inp["block_table"], inp["seq_lens"],
                   10, "fp8", False, c, bufs)
    for kern, grid, args in plan:
        kern[grid](**args)
    rs = bufs["rs"].cpu()
    cands = rs[:, int(M._CNT_C1.value)].tolist()
    assert 10 <= cands[0] <= 30 and 10 <= cands[1] <= 30 and cands[2] == 5, cands
    assert_equal("topk_idx", bufs["idx"].view(3, 1, 10), M.reference(**inp))


@pytest.mark.parametrize("scale", [-1.0, 1e9, 1e-14])
def test_bound_end_of_range_scores(scale, device):
    """Scores all <= 0, all above 2^23, all below 2^-40: the group maxima and the bound's
    linear bins lie in any part of the float range."""
    inp = ragged_inputs("dsv32", 2, [1200, 300], top_k=40, device=device, seed=3)
    inp["weights"] = inp["weights"].abs() * scale if scale < 0 else inp["weights"] * scale
    idx, logits = M.launch(config=bcfg("dsv32", 2, NUM_SPLITS=2, BOUND_GROUP=16), **dict(inp, return_logits=True))
    assert_equal("topk_idx vs own logits", idx, M.topk_of_logits(logits, 40))
    M.verify(idx, M.reference(**inp), inp)


@pytest.mark.parametrize("scale", [-1.0, 1e9, 1e-14])
def test_row_first_digit_end_bins(scale, device):
    """Scores all <= 0 (weights of one sign), all above 2^23, all below 2^-40: the k-th key
    sits in an end bin of the first digit (several binades), refined over all 32 bits."""
    inp = ragged_inputs("dsv32", 2, [600, 300], top_k=40, device=device, seed=3)
    inp["weights"] = inp["weights"].abs() * scale if scale < 0 else inp["weights"] * scale
    idx, logits = M.launch(config=rowcfg("dsv32", 2, NUM_SPLITS=2), **dict(inp, return_logits=True))
    assert_equal("topk_idx vs own logits", idx, M.topk_of_logits(logits, 40))
    M.verify(idx, M.reference(**inp), inp)


@pytest.mark.parametrize("first", ["quarter", "sampled", "sampled_byte"])
@pytest.mark.parametrize("scale", [-1.0, 1e9, 1e-14])
def test_radix_fine_first_digit_end_bins(scale, first, device):
    """``RADIX_FIRST`` "quarter" / "sampled" / "sampled_byte": scores all <= 0, all above 2^23, all below
    2^-40 put the k-th key in an end bin of the quarter-binade digit (keys of many
    binades); the four byte digits after it still select exactly."""
    inp = ragged_inputs("dsv32", 2, [600, 300], top_k=40, device=device, seed=3)
    inp["weights"] = inp["weights"].abs() * scale if scale < 0 else inp["weights"] * scale
    c = rcfg("dsv32", 2, NUM_SPLITS=2, RADIX_FIRST=first)
    idx, logits = M.launch(config=c, **dict(inp, return_logits=True))
    assert_equal("topk_idx vs own logits", idx, M.topk_of_logits(logits, 40))
    M.verify(idx, M.reference(**inp), inp)


@pytest.mark.parametrize("first", M.RADIX_SAMPLED)
@pytest.mark.parametrize("form", ["launches", "fused", "fold"])
def test_radix_sampled_threshold_fallback(form, first, device):
    """``RADIX_FIRST="sampled"`` with a sample that misleads: keys 0, 16, 32, ... (exactly
    the sampled ones) score ~100x the rest, so the threshold from the sample keeps ~22
    keys, fewer than k = 40; the fallback pass must append the rest of the row (also as a
    step of the fused launch, ``RADIX_FUSED``, and by the safe pick's last program,
    ``RADIX_FOLD``)."""
    inp = ragged_inputs("dsv32", 1, [1900, 700], top_k=40, device=device, seed=5)
    inp["weights"] = inp["weights"].abs()
    inp["k_scales"][:, ::16] *= 100.0
    c = rcfg("dsv32", 1, NUM_SPLITS=4, TOPK_SPLITS=4, RADIX_FIRST=first, RADIX_FUSED=form == "fused",
             RADIX_FOLD=form == "fold")
    idx, logits = M.launch(config=c, **dict(inp, return_logits=True))
    assert_equal("topk_idx vs own logits", idx, M.topk_of_logits(logits, 40))
    M.verify(idx, M.reference(**inp), inp)


def test_radix_fold(device):
    """``RADIX_FOLD``: the sampled first digit's fallback launch is gone (the safe pick's last
    program runs it); the same candidate counts and indices as the launch when the sample
    keeps enough keys (a no-op fallback) and when it does not (row 0: the sampled keys score
    ~100x, so the fallback appends; row 1 untouched), ragged rows and one shorter than k."""
    inp = ragged_inputs("dsv32", 1, [1900, 1300, 30], top_k=64, device=device, seed=7)
    inp["weights"] = inp["weights"].abs()
    bt0 = inp["block_table"][0].long()
    inp["k_scales"][bt0, ::16] *= 100.0  # sequence 0's sampled keys only
    out = {}
    for fold in (False, True):
        c = rcfg("dsv32", 1, NUM_SPLITS=4, TOPK_SPLITS=4, RADIX_FIRST="sampled", RADIX_FOLD=fold)
        bufs = M._buffers(3, 1, inp["block_table"].shape[1] * inp["k_cache"].shape[1], 64, False, c, device)
        plan = M._plan(inp["q"], inp["weights"], inp["k_cache"], inp["k_scales"], inp["block_table"],
                       inp["seq_lens"], 64, "fp8", False, c, bufs)
        for kern, grid, args in plan:
            kern[grid](**args)
        rs = bufs["rs"].cpu()
        modes = [a.get("MODE") for k, _, a in plan if k is M._radix_pass_kernel]
        out[fold] = (bufs["idx"].view(3, 1, 64).clone(), rs[:, [int(M._CNT_C1.value), int(M._CNT_C1X.value)]],
                     modes, rs[:, int(M._FOLD_DONE.value)].tolist())
    (i0, c0, m0, d0), (i1, c1, m1, d1) = out[False], out[True]
    assert m0.count(3) == 1 and 3 not in m1 and len(m1) == len(m0) - 1, (m0, m1)
    assert torch.equal(i0, i1) and torch.equal(c0, c1), (c0, c1)
    assert c1[0, 1] > 0 and c1[1, 1] == 0, c1  # the fallback appended for row 0 only
    assert d0 == [0, 0, 0] and d1 == [4, 4, 4]  # every MODE 2 program of each row arrived
    assert_equal("topk_idx", i1, M.reference(**inp))


def test_radix_sampled_byte_takes_a_pass_fewer():
    """``RADIX_FIRST="sampled_byte"``: the sampled threshold, then the four order bytes: one
    radix pass and one digit fewer than "sampled" (no exact quarter digit), the same fallback;
    an unknown value is refused with one line."""
    w = M.Workload(32, 131072, 1, "dsv32")
    plans = {f: M._plan_for(w, dict(M.radix_config(w), RADIX_FIRST=f, SCORE_SAMPLE=False)) for f in M.RADIX_SAMPLED}
    modes = {f: [a["MODE"] for k, _, a in p if k is M._radix_pass_kernel] for f, p in plans.items()}
    assert modes == {"sampled": [1, 2, 3, 0, 0, 0, 0, 0, 0], "sampled_byte": [1, 2, 3, 0, 0, 0, 0, 0]}, modes
    digits = {f: next(a["N_DIGITS"] for k, _, a in p if k is M._radix_place_kernel) for f, p in plans.items()}
    assert digits == {"sampled": 6, "sampled_byte": 5}
    with pytest.raises(ValueError, match="RADIX_FIRST must be one of"):
        M._plan_for(w, dict(M.radix_config(w), RADIX_FIRST="sampled_quarter"))


def test_radix_fold_pins():
    """The search space admits RADIX_FOLD only with the sampled first digit a launch a step
    (``radix_sampled_launches``, which the launcher asks too); pinned off elsewhere."""
    w = M.Workload(32, 131072, 1, "dsv32")
    c = dict(M.radix_config(w), RADIX_FOLD=True)
    assert c["RADIX_FIRST"] == "sampled" and M.radix_sampled_launches(c) and S.canonical(c, w)["RADIX_FOLD"] is True
    assert S.canonical(dict(c, RADIX_FIRST="byte"), w)["RADIX_FOLD"] is False
    w4 = M.Workload(4, 131072, 1, "dsv32")  # few rows: RADIX_FUSED admitted
    c4 = dict(M.radix_config(w4), RADIX_FIRST="sampled", RADIX_FOLD=True)
    assert S.canonical(c4, w4)["RADIX_FOLD"] is True
    assert S.canonical(dict(c4, RADIX_FUSED=True), w4)["RADIX_FOLD"] is False
    assert S.canonical(dict(c, **S._BOUND_ONLY, TOPK_ALGO="bound"), w)["RADIX_FOLD"] is False
    assert S.SPACE.complete({k: v for k, v in M.radix_config(w).items() if k != "RADIX_FOLD"})["RADIX_FOLD"] is False


PLACES = {"rank": dict(PLACE_SORT=False), "sort": dict(PLACE_SORT=True), "chunk": dict(PLACE_CHUNK=16)}


# every first digit with every placing once, each with both tie limits across the placings (the full
# product, 18 cases of ~10 s, was the largest share of CI); sampled_byte's chunked placing: the fused test
@pytest.mark.parametrize("first, place, tie_max", [
    (first, place, (4096, 3)[(i + j) % 2]) for i, first in enumerate(("byte", "quarter", "sampled"))
    for j, place in enumerate(sorted(PLACES))] + [("sampled_byte", "rank", 4096), ("sampled_byte", "sort", 3)])
def test_radix_ties_at_the_kth_score(place, tie_max, first, device, monkeypatch):
    """Pages 1..3 copy page 0: every score of those keys appears 4 times, so the k-th score is
    tied for most k; the lowest indices must win, in index order. ``tie_max=3`` sends every
    row with more than 3 ties through the one-program fallback. Then all keys equal: every
    score ties (the whole row is one bin of every digit). Each placing: ranking, one sort a
    row, sorted chunks of 16 (k = 256, 300: 16-19 chunks)."""
    monkeypatch.setattr(M, "_TIE_MAX", tie_max)
    _check_radix_ties(dict(RADIX_FIRST=first, **PLACES[place]), device)


def _check_radix_ties(over: dict, device: str) -> None:
    inp = ragged_inputs("dsv32", 1, [256], top_k=24, device=device)
    bt = inp["block_table"][0].long()
    inp["k_cache"][bt[1:4]] = inp["k_cache"][bt[0]].clone()
    inp["k_scales"][bt[1:4]] = inp["k_scales"][bt[0]].clone()
    c = rcfg("dsv32", 1, NUM_SPLITS=4, **over)
    for k in (24, 22, 3, 1, 256, 300):
        idx = M.launch(config=c, **dict(inp, top_k=k))
        assert_equal(f"topk_idx k={k}", idx, M.reference(**dict(inp, top_k=k)))
    same = ragged_inputs("dsv41-flash", 2, [200, 90], top_k=50, device=device)
    same["k_cache"][:] = same["k_cache"][0, 0]
    same["k_scales"][:] = same["k_scales"][0, 0]
    idx = M.launch(config=rcfg("dsv41-flash", 2, **over), **same)
    assert_equal("topk_idx, all keys equal", idx, M.reference(**same))
    assert idx[0, 1, :50].tolist() == list(range(50))


@pytest.mark.parametrize("first, place, tie_max", [("byte", "rank", 4096), ("quarter", "chunk", 3),
                                                   ("sampled", "sort", 4096), ("sampled", "chunk", 4096),
                                                   ("sampled_byte", "chunk", 3)])
def test_radix_fused_ties_at_the_kth_score(first, place, tie_max, device, monkeypatch):
    """``test_radix_ties_at_the_kth_score`` with every radix pass in one launch: ties at the
    k-th score (the tie list of the last digit) and a row that is one bin of every digit."""
    monkeypatch.setattr(M, "_TIE_MAX", tie_max)
    _check_radix_ties(dict(RADIX_FIRST=first, RADIX_FUSED=True, **PLACES[place]), device)


@pytest.mark.parametrize("rank_block", [16, 64])
def test_bound_ties_at_the_kth_score(rank_block, device):
    """``test_radix_ties_at_the_kth_score`` on the bound path: group maxima tied (pages that
    copy page 0), and all keys equal (every key at the bound). The row's eight programs
    append their 32-key chunks in reverse index order (the kernel maps chunks backwards), so
    ties at the k-th score split across programs and list order: the lowest indices must
    still win (taking ties in list order lost them on the H200, run 69). All keys equal
    leaves every key a candidate: the one-program selection."""
    _check_radix_ties(dict(TOPK_ALGO="bound", RADIX_FIRST="byte", BOUND_GROUP=16, TOPK_BLOCK=32, TOPK_SPLITS=8,
                           RANK_BLOCK=rank_block, BOUND_FUSED=rank_block == 64), device)


@pytest.mark.parametrize("chunk", [0, 16])
def test_row_ties(chunk, device):
    """Pages 1..3 copy page 0 (every score 4 times: ties at the k-th score for most k, the
    lowest indices first), then all keys equal (the whole row is one bin of every digit).
    One sort a row, or the chunked placing (16-key chunks)."""
    inp = ragged_inputs("dsv32", 1, [256], top_k=24, device=device)
    bt = inp["block_table"][0].long()
    inp["k_cache"][bt[1:4]] = inp["k_cache"][bt[0]].clone()
    inp["k_scales"][bt[1:4]] = inp["k_scales"][bt[0]].clone()
    c = rowcfg("dsv32", 1, NUM_SPLITS=4, PLACE_CHUNK=chunk)
    for k in (24, 22, 3, 1, 256, 300):
        assert_equal(f"topk_idx k={k}", M.launch(config=c, **dict(inp, top_k=k)), M.reference(**dict(inp, top_k=k)))
    same = ragged_inputs("dsv41-flash", 2, [300, 90], top_k=50, device=device)
    same["k_cache"][:] = same["k_cache"][0, 0]
    same["k_scales"][:] = same["k_scales"][0, 0]
    idx = M.launch(config=rowcfg("dsv41-flash", 2, PLACE_CHUNK=chunk), **same)
    assert_equal("topk_idx, all keys equal", idx, M.reference(**same))
    assert idx[0, 1, :50].tolist() == list(range(50))


def test_launches_and_graph_safety():
    """radix: eight launches whatever the shape (scoring, six passes, placing), three with
    RADIX_FUSED; row: two (scoring, one program per row). Fixed grids from host shapes only:
    nothing reads a device value on the host."""
    for w in (M.Workload(1, 8192, 1, "dsv32"), M.Workload(32, 524288, 2, "dsv41-flash")):
        # byte: six passes; quarter: one more digit; sampled: the sampled histogram, the pick
        # at its threshold, the fallback, the exact quarter digit, then the bytes
        for first, passes in (("byte", 6), ("quarter", 7), ("sampled", 9)):
            plan = M._plan_for(w, dict(M.radix_config(w), RADIX_FIRST=first, RADIX_FUSED=False))
            assert [f.__name__ for f, _, _ in plan] == ["_score_kernel"] + ["_radix_pass_kernel"] * passes + [
                "_radix_place_kernel"]
        for _, grid, _ in plan:
            assert all(isinstance(g, int) for g in grid)
    # the chunked placing (dsv32's default from 8 rows): one more launch, ranking across the chunks
    w = M.Workload(32, 131072, 1, "dsv32")
    c = M.radix_config(w)
    assert c["PLACE_CHUNK"] == M.PLACE_CHUNK_DEFAULT and not c["PLACE_SORT"]
    plan = M._plan_for(w, c)
    assert [f.__name__ for f, _, _ in plan][-2:] == ["_radix_place_kernel", "_radix_merge_rank_kernel"]
    assert plan[-1][1] == plan[-2][1] == (32, 2048 // M.PLACE_CHUNK_DEFAULT)
    with pytest.raises(ValueError, match="PLACE_CHUNK"):
        M._plan_for(w, dict(c, PLACE_SORT=True))
    with pytest.raises(ValueError, match="PLACE_CHUNK"):
        M._plan_for(w, dict(c, PLACE_CHUNK=96))
    # and after the row kernel: its selection placed by the same two launches
    wr = M.Workload(8, 8192, 1, "dsv32")
    plan = M._plan_for(wr, dict(M.row_config(wr), PLACE_CHUNK=256))
    assert [f.__name__ for f, _, _ in plan] == ["_score_kernel", "_row_topk_kernel", "_radix_place_kernel",
                                                 "_radix_merge_rank_kernel"]
    for w in (M.Workload(1, 8192, 1, "dsv32"), M.Workload(128, 32768, 2, "dsv41-flash")):
        c = M.row_config(w)
        plan = M._plan_for(w, c)
        assert [(f.__name__, grid) for f, grid, _ in plan] == [
            ("_score_kernel", (w.batch, c["NUM_SPLITS"])), ("_row_topk_kernel", (w.batch * w.next_n,))]


def test_bound_launches_and_grid():
    """bound: the scoring kernel, the bound (``bound_parts`` programs a row), the filter over (row,
    TOPK_SPLITS) and the ranking over (row, 2 x next_pow2(k) / RANK_BLOCK): four launches
    where the radix passes make 8-12; its scratch holds one max per BOUND_GROUP keys a row."""
    for w in (M.Workload(1, 524288, 1, "dsv32"), M.Workload(32, 131072, 2, "dsv41-flash")):
        c = M.bound_config(w)
        for rb in (16, 64):
            plan = M._plan_for(w, dict(c, RANK_BLOCK=rb))
            rows, k = w.batch * w.next_n, M.PROFILES[w.profile]["top_k"]
            parts = M.bound_parts(w.context, c["BOUND_GROUP"])
            assert [(f.__name__, g) for f, g, _ in plan][1:] == [
                ("_bound_threshold_kernel", (rows, parts)),
                ("_bound_topk_kernel", (rows, M.radix_splits(c, w.context))),
                ("_bound_place_kernel", (rows, 2 * k // rb))]
            assert all(isinstance(g, int) for _, grid, _ in plan for g in grid)
        bufs = M._buffers(w.batch, w.next_n, w.context, 512, False, c, "meta",
                          alloc=lambda shape, dtype, fill=None: torch.empty(shape, dtype=dtype, device="meta"))
        assert tuple(bufs["gmax"].shape) == (w.batch * w.next_n, w.context // c["BOUND_GROUP"])
        # BOUND_FUSED: no bound launch, the filter programs (8 warps) derive it
        plan = M._plan_for(w, dict(c, BOUND_FUSED=True))
        assert [f.__name__ for f, _, _ in plan] == ["_score_kernel", "_bound_topk_kernel", "_bound_place_kernel"]
        assert plan[1][2]["BOUND_FUSED"] and plan[1][2]["num_warps"] == M.bound_filter_warps(plan[1][2]["GMAX_BLOCK"])
        # every maximum in registers: 8192 (512K, 64-key groups) at 16 warps, 4096 at 8
        assert plan[1][2]["ONE_LOAD"] and plan[1][2]["GMAX_BLOCK"] == w.context // c["BOUND_GROUP"]
    with pytest.raises(ValueError, match="BOUND_GROUP"):
        M._plan_for(M.Workload(1, 8192, 1, "dsv32"), dict(M.bound_config(M.Workload(1, 8192, 1, "dsv32")),
                                                          BLOCK_N=32, BOUND_GROUP=64))


@pytest.mark.parametrize("algo", ["radix", "bound", "row", "merge"])
def test_launch_pdl_marks_the_top_k_launches(algo, monkeypatch):
    """LAUNCH_PDL on a GPU: the scoring kernel lets the next launch start early (PDL
    constexpr), every later launch of a kernel that waits first (_pdl_enter) starts as a
    programmatic dependent launch, any other keeps the plain stream order; without the
    knob, or under the interpreter, nothing changes."""
    w = M.Workload(1, 131072, 1, "dsv32")
    c = {"radix": M.radix_config, "bound": M.bound_config, "row": M.row_config, "merge": M.merge_config}[algo](w)
    plain = M._plan_for(w, c)
    assert not any(a.get("PDL") or a.get("launch_pdl") for _, _, a in plain)
    assert not any(a.get("PDL") for _, _, a in M._plan_for(w, dict(c, LAUNCH_PDL=True)))  # the interpreter
    monkeypatch.setattr(M, "interpreting", lambda: False)
    plan = M._plan_for(w, dict(c, LAUNCH_PDL=True))
    assert plan[0][2]["PDL"] and "launch_pdl" not in plan[0][2]
    for kern, _, args in plan[1:]:
        waits = kern.__name__ in M._PDL_KERNELS
        assert args.get("launch_pdl", False) == args.get("PDL", False) == waits, kern.__name__
        assert "PDL" in M.lowering.constexpr_names(kern) or not waits
    if algo in ("radix", "bound"):
        assert all(a.get("launch_pdl") for _, _, a in plan[1:])


def test_radix_fused_launches_and_grid(monkeypatch):
    """RADIX_FUSED: the scoring kernel, ONE launch for every radix pass (any first digit),
    then the same placing (one launch, two when chunked), where a launch a pass makes 8-12.
    On a GPU its grid is at most one program an SM over all rows (the row barriers need
    them all resident): TOPK_SPLITS capped to a power of two, the launch a pass again when
    even one program a row would not fit; under the interpreter one program a row."""
    monkeypatch.setattr(M, "interpreting", lambda: True)
    w = M.Workload(1, 524288, 1, "dsv32")
    for first in M.RADIX_FIRST:
        for chunk, place in ((0, ["_radix_place_kernel"]), (512, ["_radix_place_kernel", "_radix_merge_rank_kernel"])):
            c = dict(M.radix_config(w), RADIX_FIRST=first, RADIX_FUSED=True, PLACE_CHUNK=chunk)
            fused = M._plan_for(w, c)
            unfused = M._plan_for(w, dict(c, RADIX_FUSED=False))
            assert [f.__name__ for f, _, _ in fused] == ["_score_kernel", "_radix_fused_kernel"] + place
            assert len(unfused) - len(fused) == {"byte": 5, "quarter": 6, "sampled": 8, "sampled_byte": 7}[first]
            assert fused[1][1] == (1, 1) and not fused[1][2]["GRID_SYNC"]  # the interpreter: one program a row
            assert [g for _, g, _ in fused[2:]] == [g for _, g, _ in unfused[-len(place):]]
    # as on an H200 (132 SMs) and on a GPU with fewer SMs than rows, one program an SM
    monkeypatch.setattr(M, "interpreting", lambda: False)
    monkeypatch.setattr(M, "RADIX_FUSED_PER_SM", 1)
    for B, T, P, sms, want in ((1, 1, 256, 132, 128), (1, 2, 256, 132, 64), (3, 1, 64, 132, 32), (2, 2, 8, 132, 8),
                               (16, 1, 256, 132, 8), (4, 1, 256, 4, 1), (5, 1, 256, 4, 0)):
        monkeypatch.setattr(M, "sm_count", lambda dev, fallback, sms=sms: sms)
        wl = M.Workload(B, 524288, T, "dsv41-flash")
        c = dict(M.radix_config(wl), RADIX_FUSED=True, TOPK_SPLITS=P, TOPK_BLOCK=1024)
        plan = M._plan_for(wl, c)
        names = [f.__name__ for f, _, _ in plan]
        if want:
            kern, grid, args = plan[1]
            assert names[1] == "_radix_fused_kernel" and grid == (B * T, want), (B, T, sms, grid)
            assert args["TOPK_SPLITS"] == want and args["GRID_SYNC"] == (want > 1)
            assert B * T * want <= sms
        else:
            assert "_radix_fused_kernel" not in names and names.count("_radix_pass_kernel") == 6


def test_fewer_keys_than_top_k_pad_with_minus_one(device):
    inp = ragged_inputs("dsv41-flash", 2, [5, 70, 1], top_k=80, context=128, device=device)
    idx = M.launch(config=cfg("dsv41-flash", 2, BLOCK_N=32, NUM_SPLITS=2, MERGE_GROUP=2), **inp)
    assert_equal("topk_idx", idx, M.reference(**inp))
    # query i of next_n = 2 sees seq_len - 1 + i keys: 4 / 5, 69 / 70, 0 / 1
    assert (idx >= 0).sum(-1).tolist() == [[4, 5], [69, 70], [0, 1]]
    assert sorted(idx[1, 1, :70].tolist()) == list(range(70))


@pytest.mark.parametrize("path", ["merge", "radix", "row", "bound"])
def test_seq_len_beyond_the_block_table_is_clamped(path, device):
    """A seq_len past the block table's capacity (max_pages x PAGE) sees only the keys that
    exist, as in the reference; the radix path must not write scores past its row."""
    inp = ragged_inputs("dsv32", 2, [200, 90], top_k=40, context=256, device=device, seed=5)
    max_len = inp["block_table"].shape[1] * inp["k_cache"].shape[1]
    inp["seq_lens"] = torch.tensor([max_len + 37, 90], dtype=torch.int32, device=device)
    c = {"merge": cfg("dsv32", 2, BLOCK_N=32, NUM_SPLITS=2, MERGE_GROUP=2), "radix": rcfg("dsv32", 2),
         "row": rowcfg("dsv32", 2), "bound": bcfg("dsv32", 2, BOUND_GROUP=8)}[path]
    check_exact(inp, c)
    assert (M.launch(config=c, **inp)[0] >= 0).sum(-1).tolist() == [40, 40]


@pytest.mark.parametrize("path", ["merge", "radix", "row", "bound"])
def test_seq_len_past_the_block_table_clamps_after_the_causal_offset(path, device):
    """seq_len = capacity + 1 with next_n = 2: query 0 sees seq_len - 1 = every key of the
    block table (the reference clamps each query's count, not seq_len first), so with top_k
    above the capacity both queries list all keys. Clamping seq_len first hid the last key
    from query 0, and the radix path then read that unwritten score."""
    inp = ragged_inputs("dsv32", 2, [200, 90], top_k=300, context=256, device=device, seed=5)
    max_len = inp["block_table"].shape[1] * inp["k_cache"].shape[1]
    inp["seq_lens"] = torch.tensor([max_len + 1, 90], dtype=torch.int32, device=device)
    c = {"merge": cfg("dsv32", 2, BLOCK_N=32, NUM_SPLITS=2, MERGE_GROUP=2), "radix": rcfg("dsv32", 2),
         "row": rowcfg("dsv32", 2), "bound": bcfg("dsv32", 2, BOUND_GROUP=8)}[path]
    idx = M.launch(config=c, **inp)
    assert_equal("topk_idx", idx, M.reference(**inp))
    assert (idx >= 0).sum(-1).tolist() == [[max_len, max_len], [89, 90]]
    assert sorted(idx[0, 0, :max_len].tolist()) == list(range(max_len))


def test_causality_next_n_2(device):
    # the newest key scores far above all others: only the last query token may pick it
    inp = ragged_inputs("dsv32", 2, [200], top_k=8, device=device)
    page = int(inp["block_table"][0, 199 // 64])
    q_mean = inp["q"][0, 1].float().mean(0)
    inp["k_cache"][page, 199 % 64] = (q_mean.sign() * 448).to(torch.float8_e4m3fn)
    inp["k_scales"][page, 199 % 64] = 1.0
    inp["weights"][0] = inp["weights"][0].abs()
    idx = M.launch(config=cfg("dsv32", 2, BLOCK_N=64, NUM_SPLITS=2, MERGE_GROUP=2), **inp)
    assert_equal("topk_idx", idx, M.reference(**inp))
    assert int(idx[0, 1, 0]) == 199 and 199 not in idx[0, 0].tolist()


def test_exact_ties_lower_index_first(device):
    # every key of pages 0..3 repeated: each score appears 4 times, must come out in index order
    inp = ragged_inputs("dsv32", 1, [256], top_k=24, device=device)
    bt = inp["block_table"][0].long()
    inp["k_cache"][bt[1:4]] = inp["k_cache"][bt[0]].clone()
    inp["k_scales"][bt[1:4]] = inp["k_scales"][bt[0]].clone()
    idx = M.launch(config=cfg("dsv32", 1, BLOCK_N=16, NUM_SPLITS=4, MERGE_GROUP=2), **inp)
    assert_equal("topk_idx", idx, M.reference(**inp))
    first = idx[0, 0, :4].tolist()
    assert first == sorted(first) and len({i % 64 for i in first}) == 1


def test_verify_accepts_near_tie_swaps_and_rejects_wrong_keys(device):
    inp = ragged_inputs("dsv32", 1, [300, 200], top_k=20, device=device)
    ref = M.reference(**inp)
    M.verify(ref.clone(), ref, inp)
    out = ref.clone()
    out[0, 0, 3] = int(ref[0, 0, -1]) - 0  # a key of the set at the wrong rank
    out[0, 0, -1] = int(ref[0, 0, 3])
    with pytest.raises(AssertionError, match="rank|order"):
        M.verify(out, ref, inp)
    out = ref.clone()
    rest = [i for i in range(300) if i not in ref[0, 0].tolist()]
    out[0, 0, 5] = rest[0]
    with pytest.raises(AssertionError):
        M.verify(out, ref, inp)
    out = ref.clone()
    out[1, 0, -1] = -1
    with pytest.raises(AssertionError, match="padding"):
        M.verify(out, ref, inp)
    # a swap of two keys with equal scores is a valid answer
    dup = ragged_inputs("dsv32", 1, [128], top_k=10, device=device)
    bt = dup["block_table"][0].long()
    dup["k_cache"][bt[1]] = dup["k_cache"][bt[0]].clone()
    dup["k_scales"][bt[1]] = dup["k_scales"][bt[0]].clone()
    r = M.reference(**dup)
    o = r.clone()
    o[0, 0, 0], o[0, 0, 1] = r[0, 0, 1], r[0, 0, 0]
    assert (r[0, 0, 1] - r[0, 0, 0]).abs() == 64
    M.verify(o, r, dup)


@settings(max_examples=6, deadline=None)
@given(seqs=st.lists(st.integers(0, 260), min_size=1, max_size=3), top_k=st.integers(1, 70),
       next_n=st.integers(1, 3), splits=st.sampled_from([1, 2, 4]), seed=st.integers(0, 2**16))
def test_property_random_shapes(seqs, top_k, next_n, splits, seed):
    inp = ragged_inputs("dsv41-flash", next_n, seqs, top_k=top_k, context=max(seqs + [64]), seed=seed)
    out = M.launch(config=cfg("dsv41-flash", next_n, BLOCK_N=32, NUM_SPLITS=splits, MERGE_GROUP=2), **inp)
    M.verify(out, M.reference(**inp), inp)


@settings(max_examples=8, deadline=None)
@given(seqs=st.lists(st.integers(0, 300), min_size=1, max_size=3), top_k=st.integers(1, 90),
       next_n=st.integers(1, 2), profile=st.sampled_from(sorted(M.PROFILES)), splits=st.sampled_from([1, 2, 3]),
       blocks=st.sampled_from([(256, 16), (512, 32)]), place=st.sampled_from(sorted(PLACES)), dup=st.booleans(),
       first=st.sampled_from(M.RADIX_FIRST), fused=st.booleans(), seed=st.integers(0, 2**16))
def test_property_radix_random_shapes(seqs, top_k, next_n, profile, splits, blocks, place, dup, first, fused, seed):
    """Radix path on random ragged rows: exactly the top-k of the kernel's own logits (immune
    to near-ties that fp32 and float64 order apart), and ``verify`` against the reference
    (``dup``: page 1 copies page 0, so scores tie exactly at random ranks); a launch a pass
    or all passes in one (``fused``)."""
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, context=max(seqs + [128]), seed=seed)
    if dup:
        bt = inp["block_table"][0].long()
        inp["k_cache"][bt[1]] = inp["k_cache"][bt[0]].clone()
        inp["k_scales"][bt[1]] = inp["k_scales"][bt[0]].clone()
    c = rcfg(profile, next_n, NUM_SPLITS=2, TOPK_SPLITS=splits, TOPK_BLOCK=blocks[0], RANK_BLOCK=blocks[1],
             RADIX_FIRST=first, RADIX_FUSED=fused, **PLACES[place])
    idx, logits = M.launch(config=c, **dict(inp, return_logits=True))
    assert_equal("topk_idx vs own logits", idx, M.topk_of_logits(logits, top_k))
    M.verify(idx, M.reference(**inp), inp)


@settings(max_examples=6, deadline=None)
@given(seqs=st.lists(st.integers(0, 300), min_size=1, max_size=3), top_k=st.integers(1, 90),
       next_n=st.integers(1, 2), profile=st.sampled_from(sorted(M.PROFILES)), splits=st.sampled_from([1, 2, 3]),
       block=st.sampled_from([128, 256]), dup=st.booleans(), seed=st.integers(0, 2**16))
def test_property_row_random_shapes(seqs, top_k, next_n, profile, splits, block, dup, seed):
    """Row path on random ragged rows, as ``test_property_radix_random_shapes``."""
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, context=max(seqs + [128]), seed=seed)
    if dup:
        bt = inp["block_table"][0].long()
        inp["k_cache"][bt[1]] = inp["k_cache"][bt[0]].clone()
        inp["k_scales"][bt[1]] = inp["k_scales"][bt[0]].clone()
    c = rowcfg(profile, next_n, NUM_SPLITS=splits, TOPK_BLOCK=block)
    idx, logits = M.launch(config=c, **dict(inp, return_logits=True))
    assert_equal("topk_idx vs own logits", idx, M.topk_of_logits(logits, top_k))
    M.verify(idx, M.reference(**inp), inp)


@settings(max_examples=6, deadline=None)
@given(seqs=st.lists(st.integers(0, 600), min_size=1, max_size=3), top_k=st.integers(1, 90),
       next_n=st.integers(1, 2), profile=st.sampled_from(sorted(M.PROFILES)), splits=st.sampled_from([1, 2, 3]),
       group=st.sampled_from([4, 16, 64]), rank_block=st.sampled_from([16, 64]), dup=st.booleans(),
       fused=st.booleans(), seed=st.integers(0, 2**16))
def test_property_bound_random_shapes(seqs, top_k, next_n, profile, splits, group, rank_block, dup, fused, seed):
    """Bound path on random ragged rows, as ``test_property_radix_random_shapes``."""
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, context=max(seqs + [128]), seed=seed)
    if dup:
        bt = inp["block_table"][0].long()
        inp["k_cache"][bt[1]] = inp["k_cache"][bt[0]].clone()
        inp["k_scales"][bt[1]] = inp["k_scales"][bt[0]].clone()
    c = bcfg(profile, next_n, NUM_SPLITS=2, TOPK_SPLITS=splits, BOUND_GROUP=group, RANK_BLOCK=rank_block,
             BOUND_FUSED=fused)
    idx, logits = M.launch(config=c, **dict(inp, return_logits=True))
    assert_equal("topk_idx vs own logits", idx, M.topk_of_logits(logits, top_k))
    M.verify(idx, M.reference(**inp), inp)


def _run_ptx(asm: str, x: int) -> tuple[int, int]:
    """The shl / shr / and / or subset of PTX in ``asm`` on one 32-bit input ($2) -> ($0, $1)."""
    import re

    regs = {"$2": x}
    val = lambda a: int(a, 0) if a[0].isdigit() else regs[a]  # noqa: E731
    for op, dst, a, b in re.findall(r"(shl|shr|and|or)\.\w+ (\$?\w+), (\$?\w+), (\$?\w+);", asm):
        a, b = val(a), val(b)
        ops = {"shl": lambda: a << b, "shr": lambda: a >> b, "and": lambda: a & b, "or": lambda: a | b}
        regs[dst] = ops[op]() & 0xFFFFFFFF
    return regs["$0"], regs["$1"]


def test_word_decode_asm_matches_the_bytewise_decode():
    """MX_WORD_DECODE's inline PTX (GPU only; the interpreter runs the bytewise fallback; the
    Gluon scoring kernel's mxfp4 decode runs it too), run on 32-bit words: each byte's low /
    high nibble becomes the E4M3 bits of ``_e2m1x2_to_e4m3_scaled`` (value * 2^-6), whatever
    its neighbours (every byte value in every position); the q column order matches the operand."""
    import inspect

    assert "_E2M1_LO_HI_ASM" in inspect.getsource(M._e2m1_lo_hi_to_e4m3.fn)
    assert "_E2M1_LO_HI_ASM" in inspect.getsource(M._gl_mx_operand.fn)
    asm = M._E2M1_LO_HI_ASM.value

    def lo_ref(p):
        return ((p & 0x7) << 2) | ((p & 0x8) << 4)

    def hi_ref(p):
        return ((p & 0x70) >> 2) | (p & 0x80)
    for v in range(256):
        for pos in range(4):
            for fill in (0x00, 0xFF, 0x5A):
                bs = [fill] * 4
                bs[pos] = v
                lo, hi = _run_ptx(asm, int.from_bytes(bytes(bs), "little"))
                assert list(lo.to_bytes(4, "little")) == [lo_ref(b) for b in bs], (v, pos, fill)
                assert list(hi.to_bytes(4, "little")) == [hi_ref(b) for b in bs], (v, pos, fill)
    # E2M1 -> E4M3 * 2^-6 exactly, for every code
    e2m1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    for c in range(16):
        want = (-1 if c & 8 else 1) * e2m1[c & 7] * 2.0 ** -6
        got = torch.tensor([lo_ref(c)], dtype=torch.uint8).view(torch.float8_e4m3fn).float().item()
        assert got == want, (c, got, want)
    k = torch.arange(32)
    perm = torch.where(k < 16, 2 * k, 2 * (k - 16) + 1)
    assert sorted(perm.tolist()) == list(range(32))


def test_ue8m0_x64_matches_the_scale_decode():
    """The word path's per-key factor equals ``ue8m0_to_f32(c) * 64`` for every code (0: a
    subnormal scale, 249+: inf, 255: NaN), checked through the interpreter."""
    import triton
    import triton.language as tl

    @triton.jit
    def k(c_ptr, a_ptr, b_ptr):
        o = tl.arange(0, 256)
        c = tl.load(c_ptr + o)
        tl.store(a_ptr + o, M._ue8m0_x64(c))
        tl.store(b_ptr + o, M.ue8m0_to_f32(c.to(tl.uint8)) * 64.0)
    c = torch.arange(256, dtype=torch.int32)
    a, b = torch.empty(256), torch.empty(256)
    k[(1,)](c, a, b)
    assert torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_scoring_only_and_public_api(device):
    inp = ragged_inputs("dsv32", 2, [150, 90], top_k=0, device=device, logits=True)
    idx, logits = M.launch(config=cfg("dsv32", 2, NUM_SPLITS=2), **inp)
    assert idx.shape == (2, 2, 0)
    _, ref_logits = M.reference(**inp)
    M.verify((idx, logits), (idx, ref_logits), inp)
    inp = ragged_inputs("dsv41-flash", 1, [150, 90], top_k=512, device=device)
    out = M.mqa_topk(inp["q"], inp["weights"], inp["k_cache"], inp["k_scales"], inp["block_table"],
                     inp["seq_lens"], top_k=512, k_format="mxfp4")
    assert_equal("topk_idx", out, M.reference(**inp))


def test_torch_eager_baseline(device):
    for prof in ("dsv32", "dsv41-flash"):
        inp = ragged_inputs(prof, 2, [300, 17], top_k=30, device=device, logits=True)
        M.verify(M.torch_eager(**inp, chunk_elems=4096), M.reference(**inp), inp)


def test_spec_round_trip_small_workloads(device):
    for w in S.SMALL_WORKLOADS:
        inp = M.make_inputs(w, device, 1)
        c = M.default_config(w)
        assert S.constraints(c, w) and S.SPACE.contains(c)
        M.SPEC.verify(M.SPEC.launch(config=c, **inp), M.SPEC.reference(**inp), inp)


def test_validation_errors():
    inp = ragged_inputs("dsv32", 1, [100], top_k=8)
    c = cfg("dsv32")
    with pytest.raises(ValueError, match="q must be torch.float8_e4m3fn"):
        M.launch(config=c, **dict(inp, q=inp["q"].float()))
    with pytest.raises(ValueError, match="weights must have shape"):
        M.launch(config=c, **dict(inp, weights=inp["weights"][:, :, :3]))
    with pytest.raises(ValueError, match="k_format must be one of"):
        M.launch(config=c, **dict(inp, k_format="fp4"))
    with pytest.raises(ValueError, match="k_cache must be torch.uint8"):
        M.launch(config=c, **dict(inp, k_format="mxfp4"))
    with pytest.raises(ValueError, match="k_scales must have shape"):
        M.launch(config=c, **dict(inp, k_scales=inp["k_scales"][:, :32]))
    with pytest.raises(ValueError, match="top_k must be"):
        M.launch(config=c, **dict(inp, top_k=5000))
    with pytest.raises(ValueError, match="MX_FP8_DOT"):
        M.launch(config=dict(c, MX_FP8_DOT=True), **inp)


def test_cost_profiles_and_bytes_per_key():
    assert M.BYTES_PER_KEY == {"fp8": 132, "mxfp4": 68}
    inp = M.make_inputs(M.Workload(1, 64, 1, "dsv41-flash"), "cpu", 0)
    assert inp["k_cache"][0, 0].numel() + inp["k_scales"][0, 0].numel() == 68
    w = M.Workload(8, 32768, 2, "dsv32")
    assert M.cost(w) == (8 * 32768 * 132, 2 * 8 * 2 * 64 * 128 * 32768)
    assert M.cost(M.Workload(8, 32768, 1, "dsv41-flash")) == (8 * 32768 * 68, 2 * 8 * 32 * 128 * 32768)


def test_search_space_defaults_and_feasibility():
    assert len(S.WORKLOADS) == 64
    for w in S.WORKLOADS:
        c = M.default_config(w)
        assert S.SPACE.contains(c) and S.constraints(c, w), (w, c)
        assert S.feasible(w, budget_bytes=int(0.7 * 141e9)) is None, w
    assert S.feasible(M.Workload(128, 524288, 2, "dsv32"), budget_bytes=10**9)
    w = M.Workload(1, 524288, 1, "dsv32")
    # ~4 scoring programs an SM: B = 1 splits 512 ways (one program an SM before), B = 32 as tuned
    assert M.default_config(w)["NUM_SPLITS"] == 512
    assert M.default_config(M.Workload(32, 524288, 1, "dsv32"))["NUM_SPLITS"] == 16
    assert M.default_config(M.Workload(1, 8192, 1, "dsv32"))["NUM_SPLITS"] == 128  # one 64-key tile each
    assert M.default_config(M.Workload(1, 8192, 1, "dsv41-flash"))["NUM_SPLITS"] == M.ROW_DEFAULT_MAX_SPLITS
    assert not S.constraints(dict(M.default_config(w), MX_FP8_DOT=True), w)
    # each top-k path admits many configs, and none that only varies the other path's knobs
    # (RADIX_FUSED pinned off in the radix grid, which it would double from ~50 s;
    # test_search_space_radix_fused covers it; the bound path's knobs and LAUNCH_PDL pinned too:
    # canonical pins them off the bound path, test_canonical_* in test_space.py covers that;
    # SCORE_SAMPLE and SCORE_GLUON, a doubling each: test_score_sample_zero_fills_the_row_state_and_pins and
    # test_gluon_scoring_in_the_search_space cover them; off Hopper canonical pins SCORE_GLUON off anyway;
    # RADIX_FOLD, another doubling: test_radix_sampled_threshold_fallback and test_radix_fold_pins cover it)
    pins = dict(S._BOUND_ONLY, LAUNCH_PDL=False, SCORE_MAXNREG=0, SCORE_SAMPLE=False, SCORE_GLUON=False,
                RADIX_FOLD=False)
    # RADIX_FIRST pinned in the radix grid too: no constraint reads it (only canonical's SCORE_SAMPLE /
    # RADIX_FOLD pins, pinned here), so its four values walked the same configs four times (~3/4 of the test)
    for algo, fixed in (("merge", dict(S._RADIX_ONLY, **pins)),
                        ("radix", dict(S._MERGE_ONLY, RADIX_FUSED=False, RADIX_FIRST="sampled", **pins))):
        sub = S.Space({n: p for n, p in S.SPACE.items() if n not in fixed and n != "TOPK_ALGO"})
        ok = [c for c in sub.grid() if S.constraints(dict(c, TOPK_ALGO=algo, **fixed), w)]
        assert len(ok) > 100, algo
        other = dict(ok[0], TOPK_ALGO=algo, **fixed)
        k = next(iter(fixed))
        bumped = next(v for v in S.SPACE[k].values() if v != fixed[k])
        assert not S.constraints(dict(other, **{k: bumped}), w)
    w8 = M.Workload(1, 8192, 1, "dsv32")  # 8 blocks of 1024 keys: at most 8 programs a row
    assert S.constraints(dict(M.radix_config(w8), TOPK_BLOCK=1024, TOPK_SPLITS=8), w8)
    assert not S.constraints(dict(M.radix_config(w8), TOPK_BLOCK=1024, TOPK_SPLITS=16), w8)
    # the row top-k the default up to ROW_DEFAULT_MAX_CONTEXT keys for a top_k up to ROW_DEFAULT_MAX_TOPK (dsv41-flash's
    # 512, not dsv32's 2048), the radix passes otherwise; the others stay admitted
    for wl, want in ((M.Workload(1, 8192, 1, "dsv41-flash"), "row"), (M.Workload(32, 8192, 2, "dsv41-flash"), "row"),
                     (M.Workload(1, 8192, 1, "dsv32"), "radix"), (M.Workload(128, 32768, 2, "dsv41-flash"), "radix"),
                     (M.Workload(1, 131072, 1, "dsv32"), "bound"), (M.Workload(1, 524288, 1, "dsv32"), "bound"),
                     (M.Workload(8, 524288, 1, "dsv32"), "radix"),
                     (M.Workload(1, 32768, 1, "dsv41-flash"), "bound"), (M.Workload(1, 131072, 2, "dsv41-flash"), "radix"),
                     (M.Workload(1, 32768, 1, "dsv32"), "radix"), (M.Workload(128, 524288, 2, "dsv41-flash"), "radix")):
        assert M.default_config(wl)["TOPK_ALGO"] == want, wl
        assert S.constraints(M.merge_config(wl), wl) and S.constraints(M.radix_config(wl), wl)
    # the bound default's group size: 2k..8192 maxima a row, one row only
    assert [M.bound_default_group(M.Workload(1, c, 1, "dsv32")) for c in S._CONTEXT] == [0, 0, 32, 64]
    assert [M.bound_default_group(M.Workload(1, c, 1, "dsv41-flash")) for c in S._CONTEXT] == [0, 32, 64, 64]
    assert M.default_config(M.Workload(1, 131072, 1, "dsv32"))["BOUND_GROUP"] == 32
    # row: TOPK_BLOCK varies, the radix-only knobs do not, and not past S.ROW_MAX_CONTEXT
    wr = M.Workload(8, 32768, 2, "dsv32")
    row = M.row_config(wr)
    assert all(S.constraints(dict(row, TOPK_BLOCK=tb), wr) for tb in S.SPACE["TOPK_BLOCK"].values())
    assert not S.constraints(dict(row, TOPK_SPLITS=2), wr) and not S.constraints(dict(row, PLACE_SORT=True), wr)
    assert all(S.constraints(dict(row, PLACE_CHUNK=c), wr) for c in S.SPACE["PLACE_CHUNK"].values())
    assert not S.constraints(dict(row, PLACE_CHUNK=1024), M.Workload(8, 8192, 1, "dsv41-flash"))  # > k = 512
    assert not S.constraints(dict(row, CAND_MULT=4), wr)
    assert S.constraints(dict(row, NUM_SPLITS=2), M.Workload(1, 131072, 1, "dsv32"))
    assert not S.constraints(dict(row, NUM_SPLITS=2), M.Workload(1, 524288, 1, "dsv32"))


def test_search_space_radix_fused():
    """RADIX_FUSED: the default up to M.RADIX_FUSED_DEFAULT_ROWS rows (TOPK_SPLITS within its
    cap), admitted up to S.RADIX_FUSED_MAX_ROWS rows only, TOPK_SPLITS capped as the launcher
    caps it (one program an SM), pinned off on the other top-k paths; a config from before
    the knob runs a launch a pass."""
    assert S.SPACE["RADIX_FUSED"].absent is False
    assert S.SPACE.complete({k: v for k, v in M.radix_config(M.Workload(1, 8192, 1, "dsv32")).items()
                             if k != "RADIX_FUSED"})["RADIX_FUSED"] is False
    for B, T in ((1, 1), (1, 2), (2, 2), (4, 1), (8, 1), (4, 2), (16, 1), (8, 2), (32, 1), (128, 2)):
        rows = B * T
        for ctx in (8192, 524288):
            w = M.Workload(B, ctx, T, "dsv32")
            c = M.radix_config(w)
            assert c["RADIX_FUSED"] == (rows <= M.RADIX_FUSED_DEFAULT_ROWS), w
            assert M.default_config(w).get("RADIX_FUSED", False) == (rows <= M.RADIX_FUSED_DEFAULT_ROWS), w
            fused = dict(c, RADIX_FUSED=True, TOPK_SPLITS=min(c["TOPK_SPLITS"], M.radix_fused_cap(rows)))
            assert S.constraints(fused, w) == (rows <= S.RADIX_FUSED_MAX_ROWS), w
            assert S.constraints(dict(fused, RADIX_FUSED=False), w), w
            if rows <= S.RADIX_FUSED_MAX_ROWS and ctx == 524288:  # splits past one program an SM: a duplicate
                over = dict(fused, TOPK_SPLITS=2 * M.radix_fused_cap(rows))
                assert S.canonical(over, w) == fused and not S.constraints(over, w), w
                assert rows * fused["TOPK_SPLITS"] <= M.RADIX_FUSED_PER_SM * S.SMS
            if rows > S.RADIX_FUSED_MAX_ROWS:
                assert S.canonical(fused, w)["RADIX_FUSED"] is False
    w = M.Workload(1, 131072, 1, "dsv32")
    for c in (M.row_config(w), M.merge_config(w)):
        assert c["RADIX_FUSED"] is False and S.constraints(c, w)
        assert not S.constraints(dict(c, RADIX_FUSED=True), w)


def test_config_without_topk_algo_keeps_the_merge_path():
    """Pack entries tuned before TOPK_ALGO existed run the path they were tuned on."""
    old = {k: v for k, v in M.merge_config(M.Workload(1, 8192, 1, "dsv32")).items() if k not in S._RADIX_ONLY
           and k != "TOPK_ALGO"}
    plan = M._plan_for(M.Workload(1, 8192, 1, "dsv32"), old)
    assert {f.__name__ for f, _, _ in plan} == {"_score_kernel", "_merge_kernel"}
    with pytest.raises(ValueError, match="TOPK_ALGO"):
        M._plan_for(M.Workload(1, 8192, 1, "dsv32"), dict(old, TOPK_ALGO="bitonic"))


_LOWER = r"""
import json, os, sys
os.environ.pop("TRITON_INTERPRET", None)
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from kernel_templates import sparse_mqa as M
res = []
for cc, prof, n in json.loads(sys.argv[1]):
    w, short = M.Workload(1, 131072, n, prof), M.Workload(1, 32768, n, prof)
    for w, cfg in ((w, dict(M.radix_config(w), RADIX_FUSED=True)),
                   (w, dict(M.merge_config(w), NUM_SPLITS=128, MERGE_GROUP=8)),
                   (short, M.row_config(short)), (w, M.bound_config(w)),
                   (w, dict(M.bound_config(w), BOUND_FUSED=True, RANK_STEP=8192, LAUNCH_PDL=True))):
      for fn, sig, cx in M.lower_signatures(w, cfg):
        c = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx), target=GPUTarget("cuda", cc, 32),
                           options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
        ptx = c.asm["ptx"]
        res.append([cc, prof, fn.__name__, "wgmma" in ptx, "tcgen05.mma" in ptx, cfg["TOPK_ALGO"],
                    bool(cfg.get("LAUNCH_PDL")), "griddepcontrol.wait" in ptx, "griddepcontrol.launch_dependents" in ptx])
print(json.dumps(res))
"""


def test_lowers_for_sm100():
    """sm_100 (sm_90: test_default_configs_fit_sm90): the scoring MMA is tcgen05; every top-k
    path's kernels compile (the bound path's too)."""
    res = run_clean(_LOWER, json.dumps([[100, "dsv32", 2], [100, "dsv41-flash", 1]]), timeout=900)
    score = [r for r in res if r[2] == "_score_kernel"]
    assert len(score) == 10
    assert all(r[4] for r in score if r[0] == 100), "sm_100: the scoring MMA should be tcgen05"
    # LAUNCH_PDL: the scoring kernel lets the next launch start, the top-k kernels wait first
    assert all(r[8] and not r[7] for r in score if r[6]) and not any(r[7] or r[8] for r in res if not r[6])
    assert all(r[7] for r in res if r[6] and r[2] != "_score_kernel")
    assert sum(r[2] == "_merge_kernel" for r in res) == 2 * 3  # 128 splits, 8-way: three levels
    assert sum(r[2] == "_radix_fused_kernel" for r in res) == 2  # B=1 with RADIX_FUSED: every pass in one launch
    assert sum(r[2] == "_radix_place_kernel" for r in res) == 2
    assert sum(r[2] == "_bound_place_kernel" for r in res) == 4
    assert sum(r[2] == "_row_topk_kernel" for r in res) == 2
    assert sum(r[2] == "_bound_topk_kernel" for r in res) == 4  # BOUND_FUSED: no _bound_threshold_kernel
    assert sum(r[2] == "_bound_threshold_kernel" for r in res) == 2


_SM90 = r"""
import json, os, re, subprocess, tempfile
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernel_templates import sparse_mqa as M
from search_spaces.sparse_mqa import WORKLOADS
M.gluon_on_hopper = lambda: False  # the Triton defaults, on a GPU machine too (the Gluon kernel: its own test)
cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
seen = {}
def configs(wl):
    cfg = M.default_config(wl)
    yield cfg
    if cfg["TOPK_ALGO"] == "radix" and wl.batch * wl.next_n <= 4:  # RADIX_FUSED: in the space, not a default
        yield dict(cfg, RADIX_FUSED=True)
for wl, cfg in ((wl, cfg) for wl in WORKLOADS for cfg in configs(wl)):
    for fn, _grid, args in M._plan_for(wl, cfg):
        # As the JIT specializes on the GPU: pointers and 16-divisible ints get
        # tt.divisibility 16 (it sets vector widths), ints == 1 become constexprs.
        sig, cx = M.lowering.signature(fn, args)
        attrs = sig.attrs
        # NUM_SPLITS / TOPK_SPLITS only enter scalar index math, NEXT_N only the radix passes'
        # row -> sequence division: one compile per rest
        skip = ("NUM_SPLITS", "MERGE_GROUP", "TOPK_SPLITS") + (
            ("NEXT_N",) if fn in (M._radix_pass_kernel, M._radix_fused_kernel) else ())
        key = repr((fn.__name__, sorted(sig.items()), sorted((k, v) for k, v in cx.items() if k not in skip),
                    sorted(attrs), args["num_warps"], args["num_stages"]))
        if key in seen:
            continue
        c = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": args["num_warps"], "num_stages": args["num_stages"]})
        ptx = c.asm["ptx"]
        usage = None
        if os.path.exists(cuobjdump):
            with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
                f.write(c.asm["cubin"]); f.flush()
                out = subprocess.run([cuobjdump, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
                sass = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True).stdout
            m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", out)
            usage = dict(reg=int(m[1]), stack=int(m[2]), stl=len(re.findall(r"\bSTL", sass)))
        seen[key] = dict(fn=fn.__name__, wl=[wl.batch, wl.context, wl.next_n, wl.profile], cfg=cfg,
                         shared=c.metadata.shared, wgmma=sorted(set(re.findall(r"wgmma\.mma_async\S*", ptx))),
                         cp16=len(re.findall(r"cp\.async\.\w+\.shared\.global \[[^]]*\], \[[^]]*\], 0x10", ptx)),
                         cp8=len(re.findall(r"cp\.async\.\w+\.shared\.global \[[^]]*\], \[[^]]*\], 0x8", ptx)),
                         v4=len(re.findall(r"ld\.global(?:\.\w+)*\.v4", ptx)), usage=usage,
                         cx={k: v for k, v in cx.items() if k in ("PICK", "HIST", "FROM_LOGITS", "PLACE_SORT", "PLACE_CHUNK",
                                                                   "TOPK_ALGO", "RADIX_FIRST", "MODE", "GRID_SYNC")})
print(json.dumps(list(seen.values())))
"""


def test_gluon_defaults_on_hopper(monkeypatch):
    """On an sm_90 GPU with Gluon the radix / bound defaults of one query token score with
    ``SCORE_GLUON`` for both key formats (run 128 for mxfp4: 3 stages), next_n 2 and the row
    path with the Triton kernel; every default inside the space and its constraints."""
    monkeypatch.setattr(M, "gluon_on_hopper", lambda: True)
    monkeypatch.setattr(M, "target_cc", lambda: 90)
    monkeypatch.setattr(M, "gluon_available", lambda **_: True)
    for w in S.WORKLOADS:
        c = M.default_config(w)
        assert S.SPACE.contains(c) and S.constraints(c, w), (w, c)
        assert c["SCORE_GLUON"] == (w.next_n == 1 and c["TOPK_ALGO"] in ("radix", "bound")), (w, c)
    for prof, stages in (("dsv32", 4), ("dsv41-flash", 3)):
        c = M.default_config(M.Workload(32, 524288, 1, prof))
        assert (c["SCORE_GLUON"], c["BLOCK_N"], c["num_warps"], c["num_stages"]) == (True, 64, 4, stages), prof


def test_default_configs_fit_sm90():
    """The distinct default kernels of the GPU grid compile for sm_90 (with the
    specialisation real launches get) within the 232448 B of shared memory an H100 / H200
    block may have and under ``smem_estimate``; the scoring MMA is FP8 wgmma for both key
    formats and its key tile arrives through 16-byte loads (cp.async or ld.global.v4; the
    mxfp4 word decode's per-scale-block loads are 8-byte cp.async); the
    radix (a launch a pass or all fused) and row top-k kernels do not spill, nor the scoring kernel with the row path's
    histogram (where cuobjdump is there to say: the ranking sort of 2048 keys keeps one word
    on the stack, stored once, re-read outside every loop; the row kernel's sort does not).
    Triton 3.6 numbers of the same compiles are in ``default_config``'s docstring."""
    res = run_clean(_SM90, timeout=900)
    score = [r for r in res if r["fn"] == "_score_kernel"]
    assert {(r["wl"][2], r["wl"][3]) for r in score} == {(t, prof) for t in (1, 2) for prof in M.PROFILES}
    assert {r["fn"] for r in res} == {"_score_kernel", "_radix_pass_kernel", "_radix_fused_kernel",
                                      "_radix_place_kernel", "_radix_merge_rank_kernel", "_row_topk_kernel",
                                      "_bound_threshold_kernel", "_bound_topk_kernel", "_bound_place_kernel"}
    # B = 1 (1-2 rows) with RADIX_FUSED: every pass in one launch with row barriers, byte digits
    assert {(r["cx"]["RADIX_FIRST"], r["cx"]["GRID_SYNC"]) for r in res if r["fn"] == "_radix_fused_kernel"} == {
        ("byte", True)}
    assert {r["cx"]["TOPK_ALGO"] for r in score} == {"radix", "row", "bound"}
    passes = [r for r in res if r["fn"] == "_radix_pass_kernel"]
    # the byte digits (six passes) and, from 32 rows at >= 128K, the sampled first digit (nine)
    assert {(r["cx"]["RADIX_FIRST"], r["cx"]["PICK"], r["cx"]["HIST"], r["cx"]["MODE"]) for r in passes} == {
        ("byte", -1, 0, 0), ("byte", 0, -1, 0), ("byte", -1, 1, 0), ("byte", 1, 2, 0), ("byte", 2, 3, 0),
        ("byte", 3, -1, 0), ("sampled", -1, 0, 1), ("sampled", 0, -1, 2), ("sampled", 0, -1, 3),
        ("sampled", -1, 1, 0), ("sampled", 1, 2, 0), ("sampled", 2, 3, 0), ("sampled", 3, 4, 0),
        ("sampled", 4, 5, 0), ("sampled", 5, -1, 0)}
    for r in res:
        assert r["shared"] <= S.SMEM_BYTES, r
        if r["usage"] and r["fn"] == "_score_kernel":
            # no spills at RADIX_SCORE_STAGES (nor from the row path's first-digit histogram)
            assert r["usage"]["stl"] == 0, r
        if r["usage"] and r["fn"] != "_score_kernel":
            # a sort (one a row or a chunk's) may keep one word on the stack, stored once
            sort = r["fn"] == "_radix_place_kernel" and (r["cx"]["PLACE_SORT"] or r["cx"].get("PLACE_CHUNK"))
            assert r["usage"]["stl"] <= (1 if sort else 0), r
    for r in score:
        wl = M.Workload(*r["wl"])
        assert r["shared"] <= S.smem_estimate(r["cfg"], wl), (r, S.smem_estimate(r["cfg"], wl))
        assert r["wgmma"] and all(i.endswith(".e4m3.e4m3") for i in r["wgmma"]), r
        if r["cfg"].get("MX_WORD_DECODE"):
            assert r["cp8"] + r["cp16"] > 0, r
        else:
            assert r["cp16"] + r["v4"] > 0, r
        if wl.profile == "dsv32":  # fp8 keys: q plus TWO key tiles in shared memory (RADIX_SCORE_STAGES)
            q_bytes = (1 if wl.next_n == 1 else 2) * M.PROFILES["dsv32"]["heads"] * M.D_INDEX
            assert r["shared"] >= q_bytes + 2 * r["cfg"]["BLOCK_N"] * M.D_INDEX, r


@pytest.mark.gpu
@pytest.mark.parametrize("profile", ["dsv32", "dsv41-flash"])
def test_gpu_default_configs(profile, device):
    """The defaults on the GPU: 128 splits at B=4 16K and 512 at B=1 64K (two 64-key tiles a
    split), the row path's 32 at 8K (dsv41-flash), all at RADIX_SCORE_STAGES; next_n 1 and 2."""
    for w in (M.Workload(4, 16384, 1, profile), M.Workload(4, 16384, 2, profile), M.Workload(1, 65536, 1, profile),
              M.Workload(2, 8192, 2, profile)):
        inp = M.make_inputs(w, device, 0)
        M.verify(M.launch(config=M.default_config(w), **inp), M.reference(**inp), inp)


@pytest.mark.gpu
@pytest.mark.parametrize("first", M.RADIX_FIRST)
def test_gpu_radix_fused_equals_the_launch_a_pass_path(first, device):
    """RADIX_FUSED on the GPU, where a row's programs meet at real barriers (up to 128 a
    row): exactly the indices of a launch a pass (same scoring kernel, same logits), call
    after call (the barrier counters start from zero each call), and valid against the
    reference; ragged rows, one shorter than top_k."""
    for w, lens in ((M.Workload(1, 131072, 1, "dsv32"), [131072]),
                    (M.Workload(2, 32768, 2, "dsv41-flash"), [32768, 300])):
        inp = M.make_inputs(w, device, 0)
        inp["seq_lens"] = torch.tensor(lens, dtype=torch.int32, device=device)
        c = dict(M.radix_config(w), RADIX_FIRST=first, RADIX_FUSED=True)
        assert M.radix_fused_splits(c, w.context, w.batch * w.next_n, M.sm_count(device, M.SMS)) > 1
        want = M.launch(config=dict(c, RADIX_FUSED=False), **inp)
        for _ in range(3):
            assert_equal("fused vs a launch a pass", M.launch(config=c, **inp), want)
        M.verify(want, M.reference(**inp), inp)


@pytest.mark.gpu
@pytest.mark.parametrize("group, rank_block", [(64, 16), (16, 64), (32, 32)])
def test_gpu_bound_path(group, rank_block, device):
    """The bound path on the GPU, where a row's programs (up to 256) append concurrently and
    the placing ranks across programs: exactly the top-k of its own logits, the same indices
    call after call and without the logits (the counts start from zero each call), valid
    against the reference; ragged rows, one shorter than top_k, next_n 2. (Not compared with
    the radix path's indices: its scoring kernel is another compile, whose scores may round
    differently, so near-ties at the k-th can swap.)"""
    for w, lens in ((M.Workload(1, 524288, 1, "dsv32"), [524288]), (M.Workload(1, 131072, 1, "dsv32"), [100000]),
                    (M.Workload(2, 32768, 2, "dsv41-flash"), [32768, 300])):
        inp = M.make_inputs(w, device, 0)
        inp["seq_lens"] = torch.tensor(lens, dtype=torch.int32, device=device)
        k = M.PROFILES[w.profile]["top_k"]
        c = dict(M.bound_config(w), BOUND_GROUP=group, RANK_BLOCK=rank_block)
        assert c["TOPK_SPLITS"] > 1
        idx, logits = M.launch(config=c, **dict(inp, return_logits=True))
        assert_equal("bound vs its own logits", idx, M.topk_of_logits(logits, k))
        for _ in range(3):
            assert_equal("bound, call after call", M.launch(config=c, **inp), idx)
        M.verify(idx, M.reference(**inp), inp)


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["bound_fused", "bound", "radix"])
def test_gpu_launch_pdl(path, device):
    """LAUNCH_PDL on the GPU (programmatic dependent launches, each waiting in _pdl_enter):
    the same indices as the plain launches of the same config, call after call and replayed
    in a CUDA graph (the serving form), at B=1 512K and on ragged next_n 2 rows."""
    for w, lens in ((M.Workload(1, 524288, 1, "dsv32"), [524288]), (M.Workload(2, 32768, 2, "dsv41-flash"), [32768, 300])):
        inp = M.make_inputs(w, device, 0)
        inp["seq_lens"] = torch.tensor(lens, dtype=torch.int32, device=device)
        make = M.radix_config if path == "radix" else M.bound_config
        c = dict(make(w), BOUND_FUSED=path == "bound_fused", RANK_STEP=8192 if path == "bound_fused" else 2048)
        ref = M.launch(config=c, **inp)
        cp = dict(c, LAUNCH_PDL=True)
        for _ in range(3):
            assert_equal(f"{path} with PDL, call after call", M.launch(config=cp, **inp), ref)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = M.launch(config=cp, **inp)
        for _ in range(3):
            out.fill_(-7)
            g.replay()
            torch.cuda.synchronize()
            assert_equal(f"{path} with PDL, graph replay", out, ref)



def _heads(inp: dict, h: int) -> dict:
    """The inputs with only the first ``h`` query heads (strided views, as a caller may pass)."""
    return dict(inp, q=inp["q"][:, :, :h], weights=inp["weights"][:, :, :h])



def test_gluon_scoring_refused_where_it_cannot_run(device):
    """SCORE_GLUON is a performance choice: one line of why where the Gluon scoring kernel
    cannot score a call, and the launcher then runs the Triton kernel with the same config
    (here, under the interpreter: the same indices as without the key)."""
    from tuner.runtime.env import assume_target

    w = M.Workload(1, 700, 1, "dsv32")
    cfg = dict(M.bound_config(w), BLOCK_N=64, num_warps=4, num_stages=3)
    inp = ragged_inputs("dsv32", 1, [700], top_k=64, device=device)
    assert_equal("SCORE_GLUON where it cannot run", M.launch(config=dict(cfg, SCORE_GLUON=True), **inp),
                 M.launch(config=dict(cfg, SCORE_GLUON=False), **inp))
    def err(c, fmt="fp8", t=1, h=64, page=64, k=2048, logits=False, contiguous=True):
        return M.score_gluon_error(c, fmt, t, h, page, k, c["TOPK_ALGO"], logits, contiguous, compile_only=True)

    with assume_target(90):
        assert err(cfg) is None and err(dict(cfg, TOPK_ALGO="radix")) is None
        assert err(cfg, k=0, logits=True) is None and err(dict(cfg, TOPK_ALGO="merge"), k=0, logits=True) is None
        assert "neither indices nor logits" in err(cfg, k=0)
        assert err(cfg, fmt="mxfp4") is None and "one query token" in err(cfg, t=2) and "next_n=2" in err(cfg, t=2)
        assert "BLOCK_N=64" in err(dict(cfg, BLOCK_N=32)) and "BLOCK_N=64" in err(cfg, page=32)
        assert "num_warps=4" in err(dict(cfg, num_warps=8)) and "num_stages >= 2" in err(dict(cfg, num_stages=1))
        assert "at most 128 heads" in err(cfg, h=129) and err(cfg, h=128) is None
        assert "radix / bound" in err(dict(cfg, TOPK_ALGO="row"))
        assert "contiguous" in err(cfg, contiguous=False)
    with assume_target(100):
        assert "sm_90" in err(cfg)


def test_gluon_scoring_strided_cache_falls_back(device, monkeypatch):
    """A key cache that is a strided view (no TMA descriptor of its rows) is scored by the
    Triton kernel under a SCORE_GLUON config: the same indices as without it, no error."""
    inp = ragged_inputs("dsv32", 1, [300, 77], top_k=64, device=device)
    wide = torch.zeros(*inp["k_cache"].shape[:2], 256, dtype=torch.uint8, device=device)
    wide[..., :128] = inp["k_cache"].view(torch.uint8)
    inp["k_cache"] = wide[..., :128].view(torch.float8_e4m3fn)
    assert not inp["k_cache"].is_contiguous()
    cfg = dict(M.bound_config(M.Workload(2, 300, 1, "dsv32")), BLOCK_N=64, num_warps=4, num_stages=2)
    monkeypatch.setattr(M, "gluon_available", lambda **_: True)
    monkeypatch.setattr(M, "target_cc", lambda: 90)  # everything but the cache would let the Gluon kernel run
    assert_equal("SCORE_GLUON on a strided cache", M.launch(config=dict(cfg, SCORE_GLUON=True), **inp),
                 M.launch(config=cfg, **inp))


def test_gluon_scoring_in_the_search_space(monkeypatch):
    """SCORE_GLUON is drawn only where it runs: one token, the radix / bound paths, BLOCK_N 64,
    4 warps, 2+ stages, an sm_90 target with Gluon (the launcher's own test,
    ``score_gluon_error``, patched here through the template's names); for fp8 keys it pins
    SCORE_MAXNREG, for mxfp4 keys the Triton kernel's decode knobs (the Gluon kernel has its own)."""
    w = M.Workload(1, 524288, 1, "dsv32")
    cfg = dict(M.bound_config(w), BLOCK_N=64, num_warps=4, num_stages=4, SCORE_MAXNREG=0, SCORE_GLUON=True)
    monkeypatch.setattr(M, "target_cc", lambda: 0)  # no GPU (or the interpreter), whatever runs the test
    assert not S.constraints(cfg, w), "never where it cannot run"
    monkeypatch.setattr(M, "target_cc", lambda: 90)
    monkeypatch.setattr(M, "gluon_available", lambda **_: True)
    assert S.constraints(cfg, w)
    assert S.constraints(dict(cfg, TOPK_ALGO="radix", **S._BOUND_ONLY), w)
    assert not S.constraints(dict(cfg, SCORE_MAXNREG=96), w), "no register cap with the Gluon kernel"
    assert not S.constraints(dict(cfg, num_warps=8), w) and not S.constraints(dict(cfg, num_stages=1), w)
    assert not S.constraints(dict(cfg, BLOCK_N=128), w)
    two = M.Workload(1, 524288, 2, "dsv32")
    assert S.canonical(dict(cfg, **{k: v for k, v in M.bound_config(two).items() if k not in cfg}),
                       two)["SCORE_GLUON"] is False
    mx = M.Workload(1, 524288, 1, "dsv41-flash")
    cmx = dict(cfg, MX_FP8_DOT=True, MX_WORD_DECODE=True)
    assert S.canonical(dict(cfg, MX_FP8_DOT=False, MX_WORD_DECODE=False), mx) == cmx and S.constraints(cmx, mx)
    assert not S.constraints(dict(cmx, MX_WORD_DECODE=False), mx), "the Gluon kernel ignores the decode knobs"
    assert S.constraints(dict(cmx, SCORE_MAXNREG=96), mx), "mxfp4: a register cap for five programs an SM"
    assert S.smem_estimate(cfg, w) == 1024 + 64 * 128 + 4 * 64 * 128
    assert S.smem_estimate(cmx, mx) == 1024 + 32 * 128 + 4 * 64 * 64
    monkeypatch.setattr(M, "target_cc", lambda: 100)
    assert not S.constraints(cfg, w), "wgmma is sm_90 only"
    assert S.SPACE.complete({k: v for k, v in M.bound_config(w).items() if k != "SCORE_GLUON"})["SCORE_GLUON"] is False


# the sm_90 compile of a config's scoring launch, shared by the lowering scripts below: the
# compiled kernel, its name, constexprs and registers / stack (cuobjdump)
_GL_COMPILE = r"""
import json, os, re, subprocess, tempfile, triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from kernel_templates import sparse_mqa as M
from tuner.runtime.env import assume_target
BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


def compile_sm90(fn, args, source=GluonASTSource):
    # one launch compiled for sm_90 as the JIT specialises it: (kernel, constexprs, registers, stack)
    sig, cx = M.lowering.signature(fn, args)
    k = triton.compile(source(fn=fn, signature=sig, constexprs=cx, attrs=sig.attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 1})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"])
        f.flush()
        use = subprocess.run([BIN, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    reg, stack = (int(re.search(rf"{x}:(\d+)", use).group(1)) for x in ("REG", "STACK"))
    return k, cx, reg, stack


def compile_scoring(w, cfg):
    with assume_target(90):  # as `tune lower --target sm_90` plans (no GPU here)
        fn, _grid, args = M._plan_for(w, cfg)[0]
    k, cx, reg, stack = compile_sm90(fn, args)
    return k, fn.__name__, cx, reg, stack
"""

_GL_LOWER = _GL_COMPILE + r"""
res = []
for b, ctx, algo, over in ((1, 524288, "bound", {"LAUNCH_PDL": True}), (32, 524288, "radix", {"LAUNCH_PDL": False}),
                           (1, 131072, "bound", {"BOUND_GROUP": 16, "num_stages": 2, "LAUNCH_PDL": False})):
    w = M.Workload(b, ctx, 1, "dsv32")
    cfg = dict(M.bound_config(w) if algo == "bound" else M.radix_config(w), BLOCK_N=64, num_warps=4, num_stages=5,
               SCORE_MAXNREG=0, SCORE_GLUON=True)
    cfg.update(over)
    k, name, cx, reg, stack = compile_scoring(w, cfg)
    ptx = k.asm["ptx"]
    res.append([name, algo, reg, stack,
                len(re.findall(r"wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3", ptx)),
                len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared", ptx)),
                "griddepcontrol.launch_dependents" in ptx, k.metadata.shared, cx["STAGES"],
                ptx.count("fence.proxy.async")])
print(json.dumps(res))
"""


def test_gluon_scoring_lowers_for_sm90():
    """The Gluon scoring kernel compiles for sm_90 (a clean process: no interpreter): FP8
    wgmma m64n64k32 (64 heads on N), key tiles by TMA (2D tensor copies), no proxy fence in
    the loop (two before it: the barrier inits, q), no local memory, at most 128 registers (four 4-warp
    programs an SM and more), shared memory = q + the ring + mbarriers + scratch, the PDL
    hint where LAUNCH_PDL asks for it."""
    res = run_clean(_GL_LOWER)
    assert [(x[0], x[1]) for x in res] == [("_gl_score_kernel", "bound"), ("_gl_score_kernel", "radix"),
                                          ("_gl_score_kernel", "bound")]
    for name, algo, reg, stack, n_wgmma, n_copy, pdl, shared, stages, fences in res:
        assert stack == 0 and reg <= 128, (algo, reg, stack)
        assert n_wgmma >= 4, "K = 128: four m64n64k32 FP8 wgmma a tile"
        assert n_copy >= 1, "the key tiles come by TMA"
        assert fences == 2, ("two proxy fences, both before the loop (the barrier inits, then q): in the loop a "
                             "fence waited for every load in flight (run 82)")
        assert 64 * 128 + stages * 64 * 128 <= shared <= 64 * 128 + stages * 64 * 128 + 1024
    assert [x[6] for x in res] == [True, False, False]


_GL_LOWER_MX = _GL_COMPILE + r"""
res = []
for b, algo, stages in ((32, "radix", 4), (1, "bound", 3)):
    w = M.Workload(b, 524288, 1, "dsv41-flash")
    cfg = dict(M.bound_config(w) if algo == "bound" else M.radix_config(w), BLOCK_N=64, num_warps=4,
               num_stages=stages, SCORE_MAXNREG=0, SCORE_GLUON=True)
    k, name, cx, reg, stack = compile_scoring(w, cfg)
    ptx = k.asm["ptx"]
    loop = ptx[ptx.index("Inner Loop Header"):]
    res.append([name, algo, cx["MX"], reg, stack,
                len(re.findall(r"wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3", loop)),
                len(re.findall(r"cp\.async\.ca\.shared\.global", loop)), "cp.async.bulk" in ptx,
                len(re.findall(r"ldmatrix", loop)), ptx.count("fence.proxy.async"), k.metadata.shared, stages])
print(json.dumps(res))
"""


def test_gluon_mx_scoring_lowers_for_sm90():
    """The Gluon scoring kernel's mxfp4 form compiles for sm_90 (a clean process): in its loop
    four FP8 wgmma m64n32k32 a tile (one a scale block, 32 heads on N) with register A
    operands, the codes by cp.async (four copies a tile, no TMA) and read by ldmatrix, no
    proxy fence (one before the loop: q), no local memory, shared memory the q blocks + the
    code ring + scratch."""
    res = run_clean(_GL_LOWER_MX)
    assert [(x[0], x[1], x[2]) for x in res] == [("_gl_score_kernel", "radix", True),
                                                ("_gl_score_kernel", "bound", True)]
    for name, algo, mx, reg, stack, n_wgmma, n_copy, bulk, n_ldm, fences, shared, stages in res:
        assert stack == 0 and reg <= 168, (algo, reg, stack)
        assert n_wgmma == 4 and n_copy == 4 and not bulk and n_ldm >= 4, (algo, n_wgmma, n_copy, bulk, n_ldm)
        assert fences == 1, "one proxy fence (q's stores), none in the loop"
        assert 32 * 128 + stages * 64 * 64 <= shared <= 32 * 128 + stages * 64 * 64 + 4096, (algo, shared)


_GL_LOWER_SAMPLE = _GL_COMPILE + r"""
res = []
for prof, nreg in (("dsv32", 0), ("dsv41-flash", 96)):
    w = M.Workload(32, 131072, 1, prof)
    row = []
    for sample in (False, True):
        cfg = dict(M.radix_config(w), SCORE_GLUON=True, SCORE_SAMPLE=sample, SCORE_MAXNREG=nreg, num_stages=3)
        with assume_target(90):
            names = [f.__name__ for f, _, _ in M._plan_for(w, cfg)]
        k, name, cx, reg, stack = compile_scoring(w, cfg)
        loop = k.asm["ptx"][k.asm["ptx"].index("Inner Loop Header"):]
        row.append([names.count("_radix_pass_kernel"), cx["SAMPLE"], cx["ZERO_RS"], stack,
                    len(re.findall(r"\b(?:atom|red)\.", loop)) > 0])
    res.append(row)
print(json.dumps(res))
"""


def test_gluon_score_sample_plans_and_lowers_for_sm90():
    """SCORE_SAMPLE (sm_90 plan, a clean process): the Gluon scoring kernel histograms the
    sampled first digit (global atomics in its loop), leaves the row state alone (zero-filled
    by ``_buffers``: no ZERO_RS), and the radix passes drop their first launch; no local
    memory, under the mxfp4 form's 96-register cap too."""
    res = run_clean(_GL_LOWER_SAMPLE)
    for off, on in res:
        assert off == [9, False, True, 0, False] and on == [8, True, False, 0, True], (off, on)


_LOWER_FOLD = _GL_COMPILE + r"""
from triton.compiler import ASTSource
res = []
for prof in ("dsv32", "dsv41-flash"):
    w = M.Workload(32, 131072, 1, prof)
    for fold in (False, True):
        with assume_target(90):
            plan = M._plan_for(w, dict(M.radix_config(w), RADIX_FOLD=fold))
        modes = [a["MODE"] for f, _, a in plan if f is M._radix_pass_kernel]
        fn, _g, args = next(p for p in plan if p[0] is M._radix_pass_kernel and p[2]["MODE"] == 2)
        k, cx, _reg, stack = compile_sm90(fn, args, ASTSource)
        ptx = k.asm["ptx"]
        res.append([prof, fold, modes, cx["FOLD"], stack,
                    len(re.findall(r"atom\.\S*\.acq_rel\.", ptx)), len(re.findall(r"\.acquire\.", ptx))])
print(json.dumps(res))
"""


def test_radix_fold_plans_and_lowers_for_sm90():
    """RADIX_FOLD (sm_90 plans of the sampled first digit, a clean process): the fallback
    launch (MODE 3) is gone and the safe pick (MODE 2) takes FOLD: an acq_rel arrival and an
    acquire read of the list's count, no local memory."""
    for prof, fold, modes, cx_fold, stack, acq_rel, acquire in run_clean(_LOWER_FOLD):
        assert modes == ([1, 2, 0, 0, 0, 0, 0, 0] if fold else [1, 2, 3, 0, 0, 0, 0, 0, 0]) or \
            modes == ([2, 0, 0, 0, 0, 0, 0] if fold else [2, 3, 0, 0, 0, 0, 0, 0]), (prof, fold, modes)
        assert cx_fold is fold and stack == 0, (prof, fold, stack)
        assert (acq_rel >= 1 and acquire >= 1) if fold else (acq_rel == acquire == 0), (prof, fold, acq_rel, acquire)


_LOWER_SAMPLED_BYTE = _GL_COMPILE + r"""
from triton.compiler import ASTSource
res = []
for rows, fused in ((32, False), (4, True)):
    w = M.Workload(rows, 131072, 1, "dsv32")
    cfg = dict(M.radix_config(w), RADIX_FIRST="sampled_byte", RADIX_FUSED=fused, RADIX_FOLD=not fused,
               SCORE_SAMPLE=False, SCORE_GLUON=False)
    for fn, _g, args in M._plan_for(w, cfg)[1:]:
        if fn not in (M._radix_pass_kernel, M._radix_fused_kernel):
            continue
        _k, cx, _reg, stack = compile_sm90(fn, args, ASTSource)
        res.append([fn.__name__, cx.get("MODE"), cx.get("PICK"), cx.get("HIST"), stack])
print(json.dumps(res))
"""


def test_radix_sampled_byte_lowers_for_sm90():
    """``RADIX_FIRST="sampled_byte"`` compiles for sm_90 (a clean process): its passes (with
    RADIX_FOLD) and the fused launch, no local memory; picks 1-4 are the four order bytes."""
    res = run_clean(_LOWER_SAMPLED_BYTE, timeout=900)
    passes = [r[1:4] for r in res if r[0] == "_radix_pass_kernel"]
    assert passes == [[1, -1, 0], [2, 0, -1], [0, -1, 1], [0, 1, 2], [0, 2, 3], [0, 3, 4], [0, 4, -1]], passes
    assert sum(r[0] == "_radix_fused_kernel" for r in res) == 1 and all(r[4] == 0 for r in res), res


def test_score_sample_zero_fills_the_row_state_and_pins():
    """``_buffers`` zero-fills the radix state for SCORE_SAMPLE (a fill, not the scoring
    kernel's split 0, which other programs' atomics would race); the search space admits the
    knob only with the Gluon scoring and the sampled first digit (pinned off elsewhere)."""
    fills = {}

    def alloc(shape, dtype, fill=None):
        fills[tuple(shape)] = fill
        return torch.empty(shape, dtype=dtype, device="meta")
    w = M.Workload(32, 131072, 1, "dsv32")
    for sample in (False, True):
        fills.clear()
        M._buffers(32, 1, 131072, 2048, False, dict(M.radix_config(w), SCORE_SAMPLE=sample), "meta", alloc=alloc)
        assert fills[(32, int(M._RS.value))] == (0 if sample else None)
    c = dict(M.radix_config(w), SCORE_GLUON=True, BLOCK_N=64, num_warps=4, num_stages=3, SCORE_SAMPLE=True)
    assert c["RADIX_FIRST"] == "sampled"
    assert S.canonical(dict(c, RADIX_FIRST="byte"), w)["SCORE_SAMPLE"] is False
    assert S.canonical(dict(c, SCORE_GLUON=False), w)["SCORE_SAMPLE"] is False
    assert S.canonical(dict(c, **S._BOUND_ONLY, TOPK_ALGO="bound"), w)["SCORE_SAMPLE"] is False
    assert S.SPACE.complete({k: v for k, v in M.radix_config(w).items() if k != "SCORE_SAMPLE"})["SCORE_SAMPLE"] is False


@pytest.mark.gpu
def test_gpu_gluon_score_sample(device):
    """SCORE_SAMPLE on the GPU: the same indices as the sampled digit's own launch (the
    histogram is the same), call after call (the state is zero-filled each call), with PDL,
    and valid against the reference; ragged rows (an empty one, one shorter than k) and a
    sample that misleads (the sampled keys score ~100x the rest: the fallback appends)."""
    for w, lens in ((M.Workload(4, 131072, 1, "dsv32"), [131072, 100001, 300, 0]),
                    (M.Workload(3, 131072, 1, "dsv41-flash"), [131072, 64 * 7 + 5, 70000])):
        inp = M.make_inputs(w, device, 0)
        inp["seq_lens"] = torch.tensor(lens, dtype=torch.int32, device=device)
        c = dict(M.radix_config(w), RADIX_FIRST="sampled", SCORE_GLUON=True, BLOCK_N=64, num_warps=4, num_stages=3,
                 SCORE_MAXNREG=0, TOPK_SPLITS=8)
        s = dict(c, SCORE_SAMPLE=True)
        want = M.launch(config=c, **inp)
        for _ in range(2):
            assert_equal("SCORE_SAMPLE vs the sampling launch", M.launch(config=s, **inp), want)
        assert_equal("SCORE_SAMPLE with PDL", M.launch(config=dict(s, LAUNCH_PDL=True), **inp), want)
        M.verify(want, M.reference(**inp), inp)
        bad = _misleading_sample(inp, w.profile)
        assert_equal("SCORE_SAMPLE, misleading sample", M.launch(config=s, **bad), M.launch(config=c, **bad))


def _misleading_sample(inp, profile):
    """``inp`` with every 16th key of a row (the sampled ones: 16 divides the page) scoring ~100x
    the rest: the threshold from the sample keeps a few hundred keys, fewer than k, and the
    fallback appends the rest."""
    bad = dict(inp, k_scales=inp["k_scales"].clone(), weights=inp["weights"].abs())
    if profile == "dsv32":
        bad["k_scales"][:, ::16] *= 100.0
    else:  # UE8M0 exponents: x128
        bad["k_scales"][:, ::16] = (bad["k_scales"][:, ::16].int() + 7).clamp(max=254).to(torch.uint8)
    return bad


@pytest.mark.gpu
def test_gpu_radix_fold(device):
    """RADIX_FOLD on the GPU: the same indices as the fallback's own launch, call after call
    (the arrival counter starts zeroed each call), with PDL and SCORE_SAMPLE, ragged rows (an
    empty one, one shorter than k), and a sample that misleads (the row's last safe-pick
    program appends the rest of the row alone); ``RADIX_FIRST="sampled_byte"`` (no exact
    quarter digit) the same indices too."""
    for w, lens in ((M.Workload(4, 131072, 1, "dsv32"), [131072, 100001, 300, 0]),
                    (M.Workload(3, 131072, 1, "dsv41-flash"), [131072, 64 * 7 + 5, 70000])):
        inp = M.make_inputs(w, device, 1)
        inp["seq_lens"] = torch.tensor(lens, dtype=torch.int32, device=device)
        c = dict(M.radix_config(w), RADIX_FIRST="sampled", TOPK_SPLITS=8)
        f = dict(c, RADIX_FOLD=True)
        want = M.launch(config=c, **inp)
        for _ in range(2):
            assert_equal("RADIX_FOLD vs the fallback launch", M.launch(config=f, **inp), want)
        assert_equal("RADIX_FOLD with PDL", M.launch(config=dict(f, LAUNCH_PDL=True), **inp), want)
        if c["SCORE_GLUON"]:
            assert_equal("RADIX_FOLD with SCORE_SAMPLE", M.launch(config=dict(f, SCORE_SAMPLE=True), **inp), want)
        sb = dict(c, RADIX_FIRST="sampled_byte")  # the sampled threshold, then the bytes (a pass fewer)
        assert_equal("sampled_byte", M.launch(config=sb, **inp), want)
        assert_equal("sampled_byte, RADIX_FOLD", M.launch(config=dict(sb, RADIX_FOLD=True, LAUNCH_PDL=True), **inp),
                     want)
        M.verify(want, M.reference(**inp), inp)
        bad = _misleading_sample(inp, w.profile)
        want_bad = M.launch(config=c, **bad)
        assert_equal("RADIX_FOLD, misleading sample", M.launch(config=f, **bad), want_bad)
        assert_equal("sampled_byte, RADIX_FOLD, misleading sample",
                     M.launch(config=dict(sb, RADIX_FOLD=True), **bad), want_bad)


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["bound", "radix", "scores"])
def test_gpu_gluon_scoring(path, device):
    """SCORE_GLUON (the Gluon scoring kernel, one token) on the GPU, fp8 and mxfp4 keys: its
    logits equal the Triton scoring kernel's (the same wgmma products; the head sum may round
    in another order) and are -inf past each row's keys; the indices are exactly the top-k of
    its own logits, the same call after call and with PDL, and valid against the reference.
    Full 512K rows and ragged ones (tiles cut by the row's end, rows shorter than a split, an
    empty row), 64 / 40 / 32 / 20 / 16 heads (40, 20: padded query rows), ring depths 2-5,
    bound groups 16-64."""
    cases = [(M.Workload(1, 524288, 1, "dsv32"), [524288], 64, {}),
             (M.Workload(4, 131072, 1, "dsv32"), [100001, 300, 64 * 7 + 5, 0], 40, {"num_stages": 2}),
             (M.Workload(3, 32768, 1, "dsv32"), [32768, 2049, 16383], 16, {"num_stages": 3, "BOUND_GROUP": 16}),
             (M.Workload(2, 65536, 1, "dsv32"), [65536, 40000], 64, {"NUM_SPLITS": 7, "BOUND_GROUP": 32}),
             (M.Workload(1, 524288, 1, "dsv41-flash"), [524288], 32, {}),
             (M.Workload(4, 131072, 1, "dsv41-flash"), [100001, 300, 64 * 7 + 5, 0], 20, {"num_stages": 2}),
             (M.Workload(2, 65536, 1, "dsv41-flash"), [65536, 40000], 32,
              {"NUM_SPLITS": 7, "BOUND_GROUP": 32, "num_stages": 3})]
    for w, lens, h, over in cases:
        inp = _heads(M.make_inputs(w, device, 0), h)
        inp["seq_lens"] = torch.tensor(lens, dtype=torch.int32, device=device)
        k = M.PROFILES[w.profile]["top_k"]
        if path == "radix":
            over = {key: v for key, v in over.items() if key != "BOUND_GROUP"}
            base = M.radix_config(w)
        else:
            base = M.bound_config(w)
        c = dict(base, BLOCK_N=64, num_warps=4, num_stages=5, SCORE_MAXNREG=0)
        c.update(over, SCORE_GLUON=False)  # the Triton kernel (the Hopper default is the Gluon one)
        g = dict(c, SCORE_GLUON=True)
        if path == "scores":
            want = M.launch(config=c, **dict(inp, top_k=0, return_logits=True))[1]
            got = M.launch(config=g, **dict(inp, top_k=0, return_logits=True))[1]
        else:
            idx, got = M.launch(config=g, **dict(inp, return_logits=True))
            want = M.launch(config=c, **dict(inp, return_logits=True))[1]
            assert_equal(f"{path} with the Gluon scores vs their own top-k", idx, M.topk_of_logits(got, k))
            for _ in range(2):
                assert_equal(f"{path}, call after call", M.launch(config=g, **inp), idx)
            assert_equal(f"{path} with PDL", M.launch(config=dict(g, LAUNCH_PDL=True), **inp), idx)
            M.verify(idx, M.reference(**inp), inp)
        fin = torch.isfinite(want)
        assert torch.equal(fin, torch.isfinite(got)), (w, lens, h)
        torch.testing.assert_close(got[fin], want[fin], rtol=1e-5, atol=1e-6 * float(want[fin].abs().max()))
        if path == "bound":  # the group maxima, where a row has keys (a low one would only loosen the bound)
            grp = c["BOUND_GROUP"]
            gm_want, gm_got = _group_maxima(inp, c), _group_maxima(inp, g)
            for b, n in enumerate(lens):
                ng = -(-n // grp)
                torch.testing.assert_close(gm_got[b, :ng], gm_want[b, :ng], rtol=1e-5,
                                           atol=1e-6 * float(gm_want[b, :ng].abs().max()) if ng else 0.0)


def _group_maxima(inp: dict, config: dict) -> torch.Tensor:
    """The bound path's group maxima buffer after one call (``launch``'s steps, keeping the scratch)."""
    q, k_cache = inp["q"], inp["k_cache"]
    B, T = q.shape[:2]
    max_len = inp["block_table"].shape[1] * k_cache.shape[1]
    top_k = inp["top_k"]
    bufs = M._buffers(B, T, max_len, top_k, False, config, q.device)
    for kern, grid, args in M._plan(q, inp["weights"], k_cache, inp["k_scales"], inp["block_table"], inp["seq_lens"],
                                    top_k, inp["k_format"], False, config, bufs):
        kern[grid](**args)
    return bufs["gmax"].clone()


def test_space_names_are_kernel_constexprs():
    import inspect

    import triton.language as tl

    names = {n for k in (M._score_kernel, M._merge_kernel, M._radix_pass_kernel, M._radix_fused_kernel,
                         M._radix_place_kernel, M._radix_merge_rank_kernel, M._row_topk_kernel,
                         M._bound_topk_kernel, M._bound_place_kernel, M._bound_threshold_kernel)
             for n, prm in inspect.signature(k.fn).parameters.items() if prm.annotation in (tl.constexpr, "tl.constexpr")}
    # RADIX_FUSED picks the kernel (_radix_fused_kernel or _radix_pass_kernel a pass): the host's;
    # LAUNCH_PDL is a launch option (and the kernels' PDL constexpr), SCORE_MAXNREG the scoring launch's maxnreg,
    # SCORE_GLUON picks the scoring kernel (_gl_score_kernel or _score_kernel), SCORE_SAMPLE is that kernel's
    # SAMPLE (and drops a radix pass), RADIX_FOLD the safe pick's FOLD (and drops the fallback pass)
    assert set(S.SPACE) - {"num_warps", "num_stages", "RADIX_FUSED", "LAUNCH_PDL", "SCORE_MAXNREG",
                           "SCORE_GLUON", "SCORE_SAMPLE", "RADIX_FOLD"} <= names
    assert "FOLD" in names
    assert "SAMPLE" in M.lowering.constexpr_names(M._gl_score_kernel)
    assert "PDL" in names


@pytest.mark.parametrize("path, case", [("merge", CASES[1]), ("merge", CASES[4]), ("radix", RADIX_CASES[1]),
                                        ("radix", RADIX_CASES[5]), ("radix", RADIX_CASES[-1]), ("row", ROW_CASES[0]),
                                        ("row", ROW_CASES[4]), ("bound", BOUND_CASES[0]), ("bound", BOUND_CASES[3]),
                                        ("radix", FUSED_CASES[3][:4] + (
                                            dict(FUSED_CASES[3][4], RADIX_FUSED=True),))])
def test_scratch_never_read_before_written(path, case, device, monkeypatch):
    """Every uninitialised output and scratch buffer filled with 0x7F bytes (a huge finite
    score, a huge key, a huge count) instead of whatever ``torch.empty`` returns: a kernel
    that reads a score, key or counter it did not write picks the poison (the flaky CI
    failure of the seq_len clamp was such a read of an unwritten score)."""
    real = M._buffers

    def poisoned(*args, **kw):
        def alloc(shape, dtype, fill=None):
            if fill is not None:
                return torch.full(shape, fill, dtype=dtype, device=device)
            t = torch.empty(shape, dtype=dtype, device=device)
            t.view(torch.uint8).fill_(0x7F)
            return t
        return real(*args, **dict(kw, alloc=alloc))

    monkeypatch.setattr(M, "_buffers", poisoned)
    profile, next_n, seqs, top_k, over = case
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, device=device)
    c = {"merge": cfg, "radix": rcfg, "row": rowcfg, "bound": bcfg}[path](profile, next_n, **over)
    def check(inp: dict) -> None:
        idx = M.launch(config=c, **inp)
        if device == "cpu":
            assert_equal("topk_idx", idx, M.reference(**inp))
        else:
            M.verify(idx, M.reference(**inp), inp)

    check(inp)
    # the clamp case of the CI failure, poisoned: query 0 must not read key max_len - 1 unwritten
    inp = ragged_inputs("dsv32", 2, [200, 90], top_k=40, context=256, device=device, seed=5)
    max_len = inp["block_table"].shape[1] * inp["k_cache"].shape[1]
    inp["seq_lens"] = torch.tensor([max_len + 37, 90], dtype=torch.int32, device=device)
    c = {"merge": cfg, "radix": rcfg, "row": rowcfg, "bound": bcfg}[path]("dsv32", 2)
    check(inp)


@pytest.mark.parametrize("profile", ["dsv32", "dsv41-flash"])
def test_topk_ladder_rungs(profile, device):
    """benchmarks/sparse_topk_ladder.py's minimal launches (touch: read the row, write k
    indices; sort: rank k scores as the template keys them) pass their own checks against
    the scoring kernel's logits and the reference's order (rows of a few pages and a part:
    the touch loop's masked tail)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import sparse_topk_ladder

    out = sparse_topk_ladder.ladder(1, 600 if profile == "dsv41-flash" else 2100, profile, device)
    assert out["top_k"] == M.PROFILES[profile]["top_k"] and "score" not in out
