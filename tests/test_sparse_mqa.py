"""Sparse MQA indexer: indices (and logits) equal the reference through the interpreter for
both key formats, ragged and short sequences, next_n = 2 causality, exact ties, every top-k
path (radix: row-parallel digit passes, the byte or sampled first digit, ranking or sorted
chunks, ties at the k-th score, the degenerate-ties fallback; row: one program per row,
first-digit end bins, ties; bound: group maxima, the bound in parts, the filter and the
ranking); verify's tolerance; the baseline; the search space (``when`` pins, defaults
admitted on every target); lowering for sm_90 (default configs within shared memory, FP8
wgmma, 16-byte key loads, no spills in the top-k kernels, the Gluon scoring) / sm_100."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_templates import sparse_mqa as M
from kernel_templates.sparse_mqa import bound as BD
from kernel_templates.sparse_mqa import common as C
from kernel_templates.sparse_mqa import launcher as L
from kernel_templates.sparse_mqa import scoring as SC
from kernel_templates.sparse_mqa import scoring_gluon as G
from kernel_templates.sparse_mqa import topk as K
from search_spaces import sparse_mqa as S
from tuner.runtime.target import INTERPRETER, Target
from tuner.verify import assert_equal
from conftest import run_clean

ROOT = Path(__file__).resolve().parents[1]
SM90, SM100 = Target.named("sm_90"), Target.named("sm_100")


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


def _w(profile: str, next_n: int) -> M.Workload:
    return M.Workload(2, 4096, next_n, profile)


def rcfg(profile: str, next_n: int = 1, **over) -> dict:
    """The radix path with interpreter-sized blocks (256-key steps, 2 programs a row)."""
    c = dict(M.radix_config(_w(profile, next_n), INTERPRETER), TOPK_BLOCK=256, TOPK_SPLITS=2, RANK_BLOCK=16)
    return dict(c, **over)


def bcfg(profile: str, next_n: int = 1, **over) -> dict:
    """The bound path with interpreter-sized blocks (256-key steps, 2 programs a row)."""
    c = dict(M.bound_config(_w(profile, next_n), INTERPRETER), TOPK_BLOCK=256, TOPK_SPLITS=2, RANK_BLOCK=16)
    return dict(c, **over)


def rowcfg(profile: str, next_n: int = 1, **over) -> dict:
    """The row path with 128-key streaming blocks."""
    return dict(M.row_config(_w(profile, next_n), INTERPRETER), **{"TOPK_BLOCK": 128, **over})


def plan_names(w: M.Workload, c: dict, target: Target = SM90) -> list[str]:
    return [f.__name__ for f, _, _ in M._plan_for(w, c, target)]


RADIX_CASES = [
    # profile, next_n, seq_lens, top_k, config overrides
    ("dsv32", 1, [300, 37, 130], 40, dict(BLOCK_N=32, NUM_SPLITS=4)),  # a row shorter than top_k
    ("dsv32", 2, [700, 1, 0], 50, dict(BLOCK_N=16, NUM_SPLITS=2, TOPK_SPLITS=4)),  # tiny rows
    ("dsv32", 2, [900, 450], 33, dict(NUM_SPLITS=8, TOPK_SPLITS=8, RANK_BLOCK=32)),  # blocks split over programs
    ("dsv41-flash", 1, [600, 20], 64, dict(BLOCK_N=128, NUM_SPLITS=1, TOPK_SPLITS=1, TOPK_BLOCK=512)),  # 2-page tiles
    ("dsv41-flash", 2, [400, 64, 3], 16, dict(NUM_SPLITS=2, MX_FP8_DOT=False, MX_WORD_DECODE=False, RANK_BLOCK=64)),
    ("dsv41-flash", 2, [520, 333], 100, dict(BLOCK_N=32, NUM_SPLITS=3, MX_FP8_DOT=True, MX_WORD_DECODE=False)),
    ("dsv41-flash", 1, [600, 20, 129], 64, dict(BLOCK_N=128, NUM_SPLITS=2, MX_FP8_DOT=True, MX_WORD_DECODE=True)),
    # the sampled first digit (every 16th key): rows long enough for a threshold, rows whose
    # sample is too small (all keys kept), a row shorter than top_k (the fallback pass)
    ("dsv32", 1, [1900, 37, 700], 40, dict(NUM_SPLITS=4, TOPK_SPLITS=4, RADIX_FIRST="sampled")),
    ("dsv32", 2, [900, 450], 33, dict(NUM_SPLITS=8, TOPK_SPLITS=8, RANK_BLOCK=32, RADIX_FIRST="sampled")),
    # the chunked placing: sorted chunks of 16 / 32 selected keys (3-4 of them, the last
    # partial), ranked across by binary search; rows shorter than top_k leave chunks empty
    ("dsv32", 1, [300, 37, 130], 40, dict(BLOCK_N=32, NUM_SPLITS=4, PLACE_CHUNK=16)),
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
    ("dsv41-flash", 1, [600, 20, 129], 64, dict(BLOCK_N=128, NUM_SPLITS=1)),
    ("dsv41-flash", 2, [400, 64], 16, dict(NUM_SPLITS=2, MX_FP8_DOT=False, MX_WORD_DECODE=False)),
    # the selection sorted by the chunked placing launches (chunks of 16 / 32), not one sort a row
    ("dsv32", 1, [300, 37, 130, 0], 40, dict(BLOCK_N=32, NUM_SPLITS=4, PLACE_CHUNK=16)),
    ("dsv41-flash", 2, [520, 333, 3], 100, dict(BLOCK_N=32, NUM_SPLITS=3, PLACE_CHUNK=32)),
]


@pytest.mark.parametrize("profile, next_n, seqs, top_k, over", ROW_CASES)
def test_row_indices_equal_reference(profile, next_n, seqs, top_k, over, device):
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, device=device, logits=next_n == 2)
    check_exact(inp, rowcfg(profile, next_n, **over))


BOUND_CASES = [
    # profile, next_n, seq_lens, top_k, config overrides: groups of 8-64 keys (rows with more
    # groups than k: a bound; fewer: every key a candidate, past 2 x next_pow2(k) of them the
    # one-program selection), rows shorter than top_k and empty, next_n = 2, ranking blocks
    # of 16-64 positions and both ranking steps, both formats
    ("dsv32", 1, [300, 37, 130, 0], 40, dict(BLOCK_N=32, NUM_SPLITS=4, BOUND_GROUP=8)),
    ("dsv32", 2, [900, 450], 33, dict(NUM_SPLITS=8, TOPK_SPLITS=8, BOUND_GROUP=16, RANK_BLOCK=32, RANK_STEP=2048)),
    ("dsv32", 1, [2000, 700], 10, dict(NUM_SPLITS=4, TOPK_SPLITS=4)),  # 64-key groups, 4 programs a row
    ("dsv41-flash", 2, [1200, 333, 5], 20, dict(BLOCK_N=32, NUM_SPLITS=3, BOUND_GROUP=32, RANK_BLOCK=64)),
    ("dsv41-flash", 1, [600, 20, 129], 64, dict(BLOCK_N=128, NUM_SPLITS=2, BOUND_GROUP=16, TOPK_SPLITS=3,
                                                RANK_STEP=2048)),
    ("dsv41-flash", 2, [400, 64], 16, dict(NUM_SPLITS=2, MX_FP8_DOT=False, MX_WORD_DECODE=False, BOUND_GROUP=8)),
]


@pytest.mark.parametrize("profile, next_n, seqs, top_k, over", BOUND_CASES)
def test_bound_indices_equal_reference(profile, next_n, seqs, top_k, over, device):
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, device=device, logits=next_n == 2)
    check_exact(inp, bcfg(profile, next_n, **over))


@pytest.mark.parametrize("case", [BOUND_CASES[0], BOUND_CASES[3]])
def test_bound_in_parts(case, device, monkeypatch):
    """The bound launch in parts (``bound_parts``: here 8 maxima a part, so 2-16 parts a
    row, some empty on short rows): each part bounds its ceil(k * n_p / ng)-th largest max,
    the filter takes the least, and the indices stay exact."""
    profile, next_n, seqs, top_k, over = case
    monkeypatch.setattr(BD, "BOUND_PART_MAXIMA", 8)
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, device=device, logits=next_n == 2)
    c = bcfg(profile, next_n, **over)
    assert BD.bound_parts(max(seqs), c["BOUND_GROUP"]) > 1
    check_exact(inp, c)


@triton.jit
def _digit_floor_probe(o_ptr, out_ptr, d, N: tl.constexpr):
    o = tl.load(o_ptr + tl.arange(0, N)).to(tl.uint32, bitcast=True)
    agree = (C._row_digit(o) >= d) == (o.to(tl.int64) >= K._row_digit_floor(d))
    tl.store(out_ptr + tl.arange(0, N), agree.to(tl.int32))


def test_row_digit_floor_is_the_digit_test():
    """The lean filter's threshold: ``o >= _row_digit_floor(d)`` iff ``_row_digit(o) >= d`` for every
    digit (-1 and 0: every key; 255: the catch-all top bin) over order bits of every magnitude,
    each bin's edges included."""
    g = torch.Generator().manual_seed(3)
    c = 1024 + 4 * int(C._ROW_EXP_LO.value) - 1
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
    x = K._filter_first(src_ptr, max_len, start, BLOCK)
    K._filter_logits(src_ptr, max_len, start, end, theta, dst_ptr, cnt_ptr, x, BLOCK)


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
    thr, ok = BD._group_bound(x_ptr, n, want, GMAX_BLOCK, ONE_LOAD)
    tl.store(out_ptr, thr)
    tl.store(out_ptr + 1, ok.to(tl.float32))


def _group_bound(x: torch.Tensor, want: int, block: int, one_load: bool) -> tuple[float, bool]:
    out = torch.empty(2, dtype=torch.float32)
    _group_bound_probe[(1,)](x, out, x.numel(), want, GMAX_BLOCK=block, ONE_LOAD=one_load)
    return float(out[0]), bool(out[1])


@pytest.mark.parametrize("block, one_load", [(64, False), (1024, True)])
@pytest.mark.parametrize("kind", ["normal", "outlier", "two_values", "equal", "tiny_range", "huge", "negative"])
def test_group_bound_at_least_want_and_tight(kind, block, one_load):
    """``_group_bound`` (the bound path's three nested 16-bin histograms) over 1000 maxima:
    a value of the input with at least ``want`` maxima at or above it, whatever the spread
    (one outlier 1e6x the rest, two values only, all equal, a range of a few ulps, values
    near the float max, all negative), in many blocks reloaded at every pass, and held in
    registers (``ONE_LOAD``: the same bound as the looped form); on spread values within a
    few % of the exact want-th largest; an infinite range: no bound."""
    g = torch.Generator().manual_seed(5)
    x = {"normal": torch.randn(1000, generator=g),
         "outlier": torch.cat([torch.randn(999, generator=g), torch.tensor([1e6])]),
         "two_values": torch.randint(0, 2, (1000,), generator=g).float(),
         "equal": torch.full((1000,), 0.75),
         "tiny_range": 1.0 + torch.randint(0, 4, (1000,), generator=g).float() * 2**-23,
         "huge": 3e38 * torch.rand(1000, generator=g),
         "negative": -torch.rand(1000, generator=g) - 1}[kind].float()
    for want in (37, 1000) if one_load else (1, 37, 250, 1000):  # the register form: two (slow interpreted)
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


def _run_plan(inp: dict, c: dict, top_k: int, device: str) -> dict:
    """``launch``'s steps, keeping the scratch buffers (returned)."""
    B, T = inp["q"].shape[:2]
    max_len = inp["block_table"].shape[1] * inp["k_cache"].shape[1]
    bufs = L._buffers(B, T, max_len, top_k, False, c, device)
    for kern, grid, args in L._plan(inp["q"], inp["weights"], inp["k_cache"], inp["k_scales"], inp["block_table"],
                                    inp["seq_lens"], top_k, inp["k_format"], False, c, bufs,
                                    Target.of(inp["q"].device)):
        kern[grid](**args)
    return bufs


def test_bound_filters_to_few_candidates(device):
    """The bound (a lower bound of the k-th largest 16-key group max, ``_group_bound``) keeps
    few keys besides the top-k on random scores (each group max a distinct key at or above
    it, so never fewer than k); a row of at most k keys keeps all."""
    inp = ragged_inputs("dsv32", 1, [2000, 700, 5], top_k=10, device=device)
    bufs = _run_plan(inp, bcfg("dsv32", 1, NUM_SPLITS=4, TOPK_SPLITS=4, BOUND_GROUP=16), 10, device)
    cands = bufs["rs"].cpu()[:, int(C._CNT_C1.value)].tolist()
    assert 10 <= cands[0] <= 30 and 10 <= cands[1] <= 30 and cands[2] == 5, cands
    assert_equal("topk_idx", bufs["idx"].view(3, 1, 10), M.reference(**inp))


END_BIN_PATHS = {"bound": lambda: bcfg("dsv32", 2, NUM_SPLITS=2, BOUND_GROUP=16),
                 "row": lambda: rowcfg("dsv32", 2, NUM_SPLITS=2),
                 "radix_sampled": lambda: rcfg("dsv32", 2, NUM_SPLITS=2, RADIX_FIRST="sampled")}


@pytest.mark.parametrize("path", sorted(END_BIN_PATHS))
@pytest.mark.parametrize("scale", [-1.0, 1e9, 1e-14])
def test_end_of_range_scores(scale, path, device):
    """Scores all <= 0 (weights of one sign), all above 2^23, all below 2^-40: the k-th key
    sits in an end bin of the quarter-binade digit (the row path's first digit, the sampled
    radix digit), refined over all 32 bits; the bound path's group maxima and linear bins lie
    in any part of the float range."""
    inp = ragged_inputs("dsv32", 2, [600, 300], top_k=40, device=device, seed=3)
    inp["weights"] = inp["weights"].abs() * scale if scale < 0 else inp["weights"] * scale
    idx, logits = M.launch(config=END_BIN_PATHS[path](), **dict(inp, return_logits=True))
    assert_equal("topk_idx vs own logits", idx, M.topk_of_logits(logits, 40))
    M.verify(idx, M.reference(**inp), inp)


def test_radix_sampled_threshold_fallback(device):
    """``RADIX_FIRST="sampled"`` with a sample that misleads: keys 0, 16, 32, ... (exactly
    the sampled ones) of sequence 0 score ~100x the rest, so the threshold from the sample
    keeps ~22 keys, fewer than k; the fallback pass must append the rest of that row (and
    append nothing for the other rows)."""
    inp = ragged_inputs("dsv32", 1, [1900, 1300, 30], top_k=64, device=device, seed=7)
    inp["weights"] = inp["weights"].abs()
    inp["k_scales"][inp["block_table"][0].long(), ::16] *= 100.0  # sequence 0's sampled keys only
    c = rcfg("dsv32", 1, NUM_SPLITS=4, TOPK_SPLITS=4, RADIX_FIRST="sampled")
    bufs = _run_plan(inp, c, 64, device)
    fallback = bufs["rs"].cpu()[:, int(C._CNT_C1X.value)]
    assert fallback[0] > 0 and fallback[1] == 0, fallback
    assert_equal("topk_idx", bufs["idx"].view(3, 1, 64), M.reference(**inp))


def _tied_inputs(device: str) -> dict:
    """Pages 1..3 copy page 0: every score of those keys appears 4 times."""
    inp = ragged_inputs("dsv32", 1, [256], top_k=24, device=device)
    bt = inp["block_table"][0].long()
    inp["k_cache"][bt[1:4]] = inp["k_cache"][bt[0]].clone()
    inp["k_scales"][bt[1:4]] = inp["k_scales"][bt[0]].clone()
    return inp


def _check_ties(make, over: dict, device: str, ks=(24, 3, 256, 300)) -> None:
    """The k-th score tied for most k (the lowest indices must win, in index order), then all
    keys equal (every score ties: the whole row is one bin of every digit)."""
    inp = _tied_inputs(device)
    c = make("dsv32", 1, NUM_SPLITS=4, **over)
    for k in ks:
        assert_equal(f"topk_idx k={k}", M.launch(config=c, **dict(inp, top_k=k)), M.reference(**dict(inp, top_k=k)))
    same = ragged_inputs("dsv41-flash", 2, [200, 90], top_k=50, device=device)
    same["k_cache"][:] = same["k_cache"][0, 0]
    same["k_scales"][:] = same["k_scales"][0, 0]
    idx = M.launch(config=make("dsv41-flash", 2, **over), **same)
    assert_equal("topk_idx, all keys equal", idx, M.reference(**same))
    assert idx[0, 1, :50].tolist() == list(range(50))


@pytest.mark.parametrize("first, chunk, tie_max", [("byte", 0, 4096), ("byte", 16, 3), ("sampled", 0, 3),
                                                   ("sampled", 16, 4096)])
def test_radix_ties_at_the_kth_score(first, chunk, tie_max, device, monkeypatch):
    """Ties at the k-th score on the radix path, each first digit with each placing (ranking,
    sorted chunks of 16: k = 256, 300 make 16-19 chunks); ``tie_max=3`` sends every row with
    more than 3 ties through the one-program fallback."""
    monkeypatch.setattr(L, "_TIE_MAX", tie_max)
    _check_ties(rcfg, dict(RADIX_FIRST=first, PLACE_CHUNK=chunk), device)


@pytest.mark.parametrize("rank_block", [16, 64])
def test_bound_ties_at_the_kth_score(rank_block, device):
    """Ties on the bound path: group maxima tied (pages that copy page 0), and all keys equal
    (every key at the bound). The row's eight programs append their 32-key chunks in reverse
    index order (the kernel maps chunks backwards), so ties at the k-th score split across
    programs and list order: the lowest indices must still win (taking ties in list order
    lost them on an H200). All keys equal leaves every key a candidate: the one-program
    selection."""
    _check_ties(bcfg, dict(BOUND_GROUP=16, TOPK_BLOCK=32, TOPK_SPLITS=8, RANK_BLOCK=rank_block), device)


@pytest.mark.parametrize("chunk", [0, 16])
def test_row_ties(chunk, device):
    """Ties on the row path: one sort a row, or the chunked placing (16-key chunks)."""
    _check_ties(rowcfg, dict(PLACE_CHUNK=chunk), device)


def test_launches_and_graph_safety():
    """radix: the scoring, six passes (byte) or nine (sampled: the sampled histogram, the pick
    at its threshold, the fallback, the exact quarter digit, then the bytes), the placing;
    row: two launches (scoring, one program per row). Fixed grids from host shapes only:
    nothing reads a device value on the host."""
    for w in (M.Workload(1, 8192, 1, "dsv32"), M.Workload(32, 524288, 2, "dsv41-flash")):
        for first, passes in (("byte", 6), ("sampled", 9)):
            plan = M._plan_for(w, dict(M.radix_config(w, SM90), RADIX_FIRST=first, SCORE_SAMPLE=False), SM90)
            assert [f.__name__ for f, _, _ in plan][1:] == ["_radix_pass_kernel"] * passes + ["_radix_place_kernel"]
            assert [a["MODE"] for f, _, a in plan if f is K._radix_pass_kernel][:3] == (
                [1, 2, 3] if first == "sampled" else [0, 0, 0])
        for _, grid, _ in plan:
            assert all(isinstance(g, int) for g in grid)
    # the chunked placing (dsv32's default from 8 rows): one more launch, ranking across the chunks
    w = M.Workload(32, 131072, 1, "dsv32")
    c = M.radix_config(w, SM90)
    assert c["PLACE_CHUNK"] == M.PLACE_CHUNK_DEFAULT
    plan = M._plan_for(w, c, SM90)
    assert [f.__name__ for f, _, _ in plan][-2:] == ["_radix_place_kernel", "_radix_merge_rank_kernel"]
    assert plan[-1][1] == plan[-2][1] == (32, 2048 // M.PLACE_CHUNK_DEFAULT)
    with pytest.raises(ValueError, match="PLACE_CHUNK"):
        M._plan_for(w, dict(c, PLACE_CHUNK=96), SM90)
    with pytest.raises(ValueError, match="RADIX_FIRST must be one of"):
        M._plan_for(w, dict(c, RADIX_FIRST="quarter"), SM90)
    with pytest.raises(ValueError, match="TOPK_ALGO"):
        M._plan_for(w, dict(c, TOPK_ALGO="merge"), SM90)
    # and after the row kernel: its selection placed by the same two launches
    wr = M.Workload(8, 8192, 1, "dsv32")
    assert plan_names(wr, dict(M.row_config(wr, SM90), PLACE_CHUNK=256)) == [
        "_score_kernel", "_row_topk_kernel", "_radix_place_kernel", "_radix_merge_rank_kernel"]
    for w in (M.Workload(1, 8192, 1, "dsv32"), M.Workload(128, 32768, 2, "dsv41-flash")):
        c = M.row_config(w, SM90)
        assert [(f.__name__, grid) for f, grid, _ in M._plan_for(w, c, SM90)] == [
            ("_score_kernel", (w.batch, c["NUM_SPLITS"])), ("_row_topk_kernel", (w.batch * w.next_n,))]


def test_bound_launches_and_grid():
    """bound: the scoring kernel, the bound (``bound_parts`` programs a row), the filter over (row,
    TOPK_SPLITS) and the ranking over (row, 2 x next_pow2(k) / RANK_BLOCK): four launches
    where the radix passes make 8-11; its scratch holds one max per BOUND_GROUP keys a row."""
    for w in (M.Workload(1, 524288, 1, "dsv32"), M.Workload(32, 131072, 2, "dsv41-flash")):
        c = M.bound_config(w, SM90)
        for rb in (16, 64):
            plan = M._plan_for(w, dict(c, RANK_BLOCK=rb), SM90)
            rows, k = w.batch * w.next_n, M.PROFILES[w.profile]["top_k"]
            parts = BD.bound_parts(w.context, c["BOUND_GROUP"])
            assert [(f.__name__, g) for f, g, _ in plan][1:] == [
                ("_bound_threshold_kernel", (rows, parts)),
                ("_bound_topk_kernel", (rows, L.radix_splits(c, w.context))),
                ("_bound_place_kernel", (rows, 2 * k // rb))]
            assert all(isinstance(g, int) for _, grid, _ in plan for g in grid)
        bufs = L._buffers(w.batch, w.next_n, w.context, 512, False, c, "meta",
                          alloc=lambda shape, dtype, fill=None: torch.empty(shape, dtype=dtype, device="meta"))
        assert tuple(bufs["gmax"].shape) == (w.batch * w.next_n, w.context // c["BOUND_GROUP"])
    w = M.Workload(1, 8192, 1, "dsv32")
    with pytest.raises(ValueError, match="BOUND_GROUP"):
        M._plan_for(w, dict(M.bound_config(w, SM90), BLOCK_N=32, BOUND_GROUP=64), SM90)


@pytest.mark.parametrize("algo", ["radix", "bound", "row"])
def test_launch_pdl_marks_the_top_k_launches(algo):
    """LAUNCH_PDL on sm_90: the scoring kernel lets the next launch start early (PDL
    constexpr), every later launch of a kernel that waits first (_pdl_enter) starts as a
    programmatic dependent launch, any other keeps the plain stream order; without the
    knob, or on the interpreter, nothing changes."""
    w = M.Workload(1, 131072, 1, "dsv32")
    c = dict({"radix": M.radix_config, "bound": M.bound_config, "row": M.row_config}[algo](w, SM90),
             SCORE_GLUON=False)
    assert not any(a.get("PDL") or a.get("launch_pdl") for _, _, a in M._plan_for(w, dict(c, LAUNCH_PDL=False), SM90))
    assert not any(a.get("PDL") for _, _, a in M._plan_for(w, dict(c, LAUNCH_PDL=True), INTERPRETER))
    plan = M._plan_for(w, dict(c, LAUNCH_PDL=True), SM90)
    assert plan[0][2]["PDL"] and "launch_pdl" not in plan[0][2]
    for kern, _, args in plan[1:]:
        waits = kern.__name__ in L._PDL_KERNELS
        assert args.get("launch_pdl", False) == args.get("PDL", False) == waits, kern.__name__
        assert "PDL" in M.lowering.constexpr_names(kern) or not waits
    if algo in ("radix", "bound"):
        assert all(a.get("launch_pdl") for _, _, a in plan[1:])


def test_fewer_keys_than_top_k_pad_with_minus_one(device):
    inp = ragged_inputs("dsv41-flash", 2, [5, 70, 1], top_k=80, context=128, device=device)
    idx = M.launch(config=rcfg("dsv41-flash", 2, BLOCK_N=32, NUM_SPLITS=2), **inp)
    assert_equal("topk_idx", idx, M.reference(**inp))
    # query i of next_n = 2 sees seq_len - 1 + i keys: 4 / 5, 69 / 70, 0 / 1
    assert (idx >= 0).sum(-1).tolist() == [[4, 5], [69, 70], [0, 1]]
    assert sorted(idx[1, 1, :70].tolist()) == list(range(70))


PATHS = {"radix": lambda: rcfg("dsv32", 2), "row": lambda: rowcfg("dsv32", 2),
         "bound": lambda: bcfg("dsv32", 2, BOUND_GROUP=8)}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_seq_len_past_the_block_table_is_clamped(path, device):
    """A seq_len past the block table's capacity (max_pages x PAGE) sees only the keys that
    exist, as in the reference: clamped after the causal offset (seq_len = capacity + 1 with
    next_n = 2: query 0 sees every key; clamping seq_len first hid the last key from query 0,
    and the radix path then read that unwritten score), and no scores written past the row."""
    c = PATHS[path]()
    inp = ragged_inputs("dsv32", 2, [200, 90], top_k=40, context=256, device=device, seed=5)
    max_len = inp["block_table"].shape[1] * inp["k_cache"].shape[1]
    inp["seq_lens"] = torch.tensor([max_len + 37, 90], dtype=torch.int32, device=device)
    check_exact(inp, c)
    assert (M.launch(config=c, **inp)[0] >= 0).sum(-1).tolist() == [40, 40]
    inp = dict(inp, top_k=300, seq_lens=torch.tensor([max_len + 1, 90], dtype=torch.int32, device=device))
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
    idx = M.launch(config=rcfg("dsv32", 2, BLOCK_N=64, NUM_SPLITS=2), **inp)
    assert_equal("topk_idx", idx, M.reference(**inp))
    assert int(idx[0, 1, 0]) == 199 and 199 not in idx[0, 0].tolist()


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


def _random_case(profile, next_n, seqs, top_k, dup, seed) -> dict:
    inp = ragged_inputs(profile, next_n, seqs, top_k=top_k, context=max(seqs + [128]), seed=seed)
    if dup:  # page 1 copies page 0: scores tie exactly at random ranks
        bt = inp["block_table"][0].long()
        inp["k_cache"][bt[1]] = inp["k_cache"][bt[0]].clone()
        inp["k_scales"][bt[1]] = inp["k_scales"][bt[0]].clone()
    return inp


def _check_own_topk(inp: dict, c: dict) -> None:
    """Exactly the top-k of the kernel's own logits (immune to near-ties that fp32 and float64
    order apart), and ``verify`` against the reference."""
    idx, logits = M.launch(config=c, **dict(inp, return_logits=True))
    assert_equal("topk_idx vs own logits", idx, M.topk_of_logits(logits, inp["top_k"]))
    M.verify(idx, M.reference(**inp), inp)


_RANDOM = dict(seqs=st.lists(st.integers(0, 300), min_size=1, max_size=3), top_k=st.integers(1, 90),
               next_n=st.integers(1, 2), profile=st.sampled_from(sorted(M.PROFILES)), splits=st.sampled_from([1, 2, 3]),
               dup=st.booleans(), seed=st.integers(0, 2**16))


@settings(max_examples=5, deadline=None)
@given(**_RANDOM, blocks=st.sampled_from([(256, 16), (512, 32)]), chunk=st.sampled_from([0, 16]),
       first=st.sampled_from(C.RADIX_FIRST))
def test_property_radix_random_shapes(seqs, top_k, next_n, profile, splits, dup, seed, blocks, chunk, first):
    """Radix path on random ragged rows."""
    _check_own_topk(_random_case(profile, next_n, seqs, top_k, dup, seed),
                    rcfg(profile, next_n, NUM_SPLITS=2, TOPK_SPLITS=splits, TOPK_BLOCK=blocks[0], RANK_BLOCK=blocks[1],
                         RADIX_FIRST=first, PLACE_CHUNK=chunk))


@settings(max_examples=4, deadline=None)
@given(**_RANDOM, block=st.sampled_from([128, 256]))
def test_property_row_random_shapes(seqs, top_k, next_n, profile, splits, dup, seed, block):
    """Row path on random ragged rows."""
    _check_own_topk(_random_case(profile, next_n, seqs, top_k, dup, seed),
                    rowcfg(profile, next_n, NUM_SPLITS=splits, TOPK_BLOCK=block))


@settings(max_examples=5, deadline=None)
@given(**dict(_RANDOM, seqs=st.lists(st.integers(0, 600), min_size=1, max_size=3)),
       group=st.sampled_from([4, 16, 64]), rank_block=st.sampled_from([16, 64]), step=st.sampled_from([2048, 8192]))
def test_property_bound_random_shapes(seqs, top_k, next_n, profile, splits, dup, seed, group, rank_block, step):
    """Bound path on random ragged rows."""
    _check_own_topk(_random_case(profile, next_n, seqs, top_k, dup, seed),
                    bcfg(profile, next_n, NUM_SPLITS=2, TOPK_SPLITS=splits, BOUND_GROUP=group, RANK_BLOCK=rank_block,
                         RANK_STEP=step))


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

    assert "_E2M1_LO_HI_ASM" in inspect.getsource(SC._e2m1_lo_hi_to_e4m3.fn)
    assert "_E2M1_LO_HI_ASM" in inspect.getsource(G._gl_mx_operand.fn)
    asm = SC._E2M1_LO_HI_ASM.value

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

    @triton.jit
    def k(c_ptr, a_ptr, b_ptr):
        o = tl.arange(0, 256)
        c = tl.load(c_ptr + o)
        tl.store(a_ptr + o, SC._ue8m0_x64(c))
        tl.store(b_ptr + o, SC.ue8m0_to_f32(c.to(tl.uint8)) * 64.0)
    c = torch.arange(256, dtype=torch.int32)
    a, b = torch.empty(256), torch.empty(256)
    k[(1,)](c, a, b)
    assert torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_scoring_only_and_public_api(device):
    inp = ragged_inputs("dsv32", 2, [150, 90], top_k=0, device=device, logits=True)
    c = rcfg("dsv32", 2, NUM_SPLITS=2)
    idx, logits = M.launch(config=c, **inp)
    assert idx.shape == (2, 2, 0)
    _, ref_logits = M.reference(**inp)
    M.verify((idx, logits), (idx, ref_logits), inp)
    assert M.launch(config=c, **dict(inp, return_logits=False)).shape == (2, 2, 0)  # nothing asked: no launch
    inp = ragged_inputs("dsv41-flash", 1, [150, 90], top_k=512, device=device)
    out = M.mqa_topk(inp["q"], inp["weights"], inp["k_cache"], inp["k_scales"], inp["block_table"],
                     inp["seq_lens"], top_k=512, k_format="mxfp4")
    assert_equal("topk_idx", out, M.reference(**inp))


def test_torch_eager_baseline(device):
    for prof in ("dsv32", "dsv41-flash"):
        inp = ragged_inputs(prof, 2, [300, 17], top_k=30, device=device, logits=True)
        M.verify(M.torch_eager(**inp, chunk_elems=4096), M.reference(**inp), inp)


def test_spec_round_trip_small_workloads(device):
    t = Target.of(device)
    for w in S.SMALL_WORKLOADS:
        inp = M.make_inputs(w, device, 1)
        c = M.default_config(w, t)
        assert S.SPACE.canonical(c, w, t) == c and S.constraints(c, w, t) and S.SPACE.contains(c)
        M.SPEC.verify(M.SPEC.launch(config=c, **inp), M.SPEC.reference(**inp), inp)


def test_validation_errors():
    inp = ragged_inputs("dsv32", 1, [100], top_k=8)
    c = rcfg("dsv32")
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
    with pytest.raises(ValueError, match=r"lacks \['RANK_BLOCK'\]"):  # a config is complete: no fallback
        M.launch(config={k: v for k, v in c.items() if k != "RANK_BLOCK"}, **inp)
    for knob, bad in (("NUM_SPLITS", 0), ("BLOCK_N", 48), ("TOPK_ALGO", "merge"), ("LAUNCH_PDL", 1),
                      ("num_warps", 64), ("RADIX_FIRST", "sampled_byte")):
        with pytest.raises(ValueError, match=f"sparse_mqa: {knob} must be"):
            M.launch(config=dict(c, **{knob: bad}), **inp)
    with pytest.raises(TypeError, match="config must be a dict"):
        M.launch(config=list(c.items()), **inp)


def test_cost_profiles_and_bytes_per_key():
    assert M.BYTES_PER_KEY == {"fp8": 132, "mxfp4": 68}
    inp = M.make_inputs(M.Workload(1, 64, 1, "dsv41-flash"), "cpu", 0)
    assert inp["k_cache"][0, 0].numel() + inp["k_scales"][0, 0].numel() == 68
    w = M.Workload(8, 32768, 2, "dsv32")
    assert M.cost(w) == (8 * 32768 * 132, 2 * 8 * 2 * 64 * 128 * 32768)
    assert M.cost(M.Workload(8, 32768, 1, "dsv41-flash")) == (8 * 32768 * 68, 2 * 8 * 32 * 128 * 32768)


@pytest.mark.parametrize("target", ["sm_90", "sm_100", "interpreter"])
def test_defaults_are_canonical_and_admitted_on_every_target(target):
    """Every default of the GPU grid (and the interpreter's) is complete, canonical for the
    target (``SPACE.canonical`` leaves it as it is) and within the constraints; the Gluon
    scoring only on sm_90, for one token on the radix / bound paths; PDL never on the
    interpreter; the interpreter's defaults sized by its 4 SMs."""
    t = Target.named(target)
    assert len(S.WORKLOADS) == 64
    for w in S.WORKLOADS + S.SMALL_WORKLOADS:
        c = M.default_config(w, t)
        assert S.SPACE.contains(c) and S.SPACE.canonical(c, w, t) == c and S.constraints(c, w, t), (w, c)
        assert c["SCORE_GLUON"] == (target == "sm_90" and w.next_n == 1 and c["TOPK_ALGO"] != "row"), (w, c)
        assert not (t.interpret and c["LAUNCH_PDL"])
    if target == "sm_90":
        for prof, stages in (("dsv32", 4), ("dsv41-flash", 3)):
            c = M.default_config(M.Workload(32, 524288, 1, prof), t)
            assert (c["SCORE_GLUON"], c["BLOCK_N"], c["num_warps"], c["num_stages"]) == (True, 64, 4, stages), prof
    if target == "interpreter":
        assert M.default_config(M.Workload(1, 524288, 1, "dsv32"), t)["NUM_SPLITS"] == 16  # 4 a 'SM'


def test_search_space_defaults_and_feasibility():
    for w in S.WORKLOADS:
        assert S.feasible(w, budget_bytes=int(0.7 * 141e9)) is None, w
    assert S.feasible(M.Workload(128, 524288, 2, "dsv32"), budget_bytes=10**9)
    w = M.Workload(1, 524288, 1, "dsv32")
    # ~4 scoring programs an SM: B = 1 splits 512 ways, B = 32 16
    assert M.default_config(w, SM90)["NUM_SPLITS"] == 512
    assert M.default_config(M.Workload(32, 524288, 1, "dsv32"), SM90)["NUM_SPLITS"] == 16
    assert M.default_config(M.Workload(1, 8192, 1, "dsv32"), SM90)["NUM_SPLITS"] == 128  # one 64-key tile each
    assert M.default_config(M.Workload(1, 8192, 1, "dsv41-flash"), SM90)["NUM_SPLITS"] == M.ROW_DEFAULT_MAX_SPLITS
    w8 = M.Workload(1, 8192, 1, "dsv32")  # 8 blocks of 1024 keys: at most 8 programs a row
    r8 = dict(M.radix_config(w8, SM90), TOPK_BLOCK=1024, TOPK_SPLITS=16)
    assert S.SPACE.canonical(r8, w8, SM90)["TOPK_SPLITS"] == 8
    # the row top-k the default up to ROW_DEFAULT_MAX_CONTEXT keys for a top_k up to ROW_DEFAULT_MAX_TOPK
    # (dsv41-flash's 512, not dsv32's 2048), the bound path for one row with enough group maxima, the radix
    # passes otherwise; the others stay admitted
    for wl, want in ((M.Workload(1, 8192, 1, "dsv41-flash"), "row"), (M.Workload(32, 8192, 2, "dsv41-flash"), "row"),
                     (M.Workload(1, 8192, 1, "dsv32"), "radix"), (M.Workload(128, 32768, 2, "dsv41-flash"), "radix"),
                     (M.Workload(1, 131072, 1, "dsv32"), "bound"), (M.Workload(1, 524288, 1, "dsv32"), "bound"),
                     (M.Workload(8, 524288, 1, "dsv32"), "radix"),
                     (M.Workload(1, 32768, 1, "dsv41-flash"), "bound"), (M.Workload(1, 131072, 2, "dsv41-flash"), "radix"),
                     (M.Workload(1, 32768, 1, "dsv32"), "radix"), (M.Workload(128, 524288, 2, "dsv41-flash"), "radix")):
        assert M.default_config(wl, SM90)["TOPK_ALGO"] == want, wl
        assert S.constraints(M.radix_config(wl, SM90), wl, SM90) and S.constraints(M.bound_config(wl, SM90), wl, SM90)
    # the bound default's group size: 2k..8192 maxima a row, one row only
    assert [M.bound_default_group(M.Workload(1, c, 1, "dsv32")) for c in S._CONTEXT] == [0, 0, 32, 64]
    assert [M.bound_default_group(M.Workload(1, c, 1, "dsv41-flash")) for c in S._CONTEXT] == [0, 32, 64, 64]
    assert M.default_config(M.Workload(1, 131072, 1, "dsv32"), SM90)["BOUND_GROUP"] == 32
    # row: TOPK_BLOCK and PLACE_CHUNK vary, not past S.ROW_MAX_CONTEXT
    wr = M.Workload(8, 32768, 2, "dsv32")
    row = M.row_config(wr, SM90)
    assert all(S.constraints(dict(row, TOPK_BLOCK=tb), wr, SM90) for tb in S.SPACE["TOPK_BLOCK"].values())
    assert all(S.constraints(dict(row, PLACE_CHUNK=c), wr, SM90) for c in S.SPACE["PLACE_CHUNK"].values())
    assert not S.constraints(dict(row, PLACE_CHUNK=1024), M.Workload(8, 8192, 1, "dsv41-flash"), SM90)  # > k = 512
    assert S.constraints(dict(row, NUM_SPLITS=2), M.Workload(1, 131072, 1, "dsv32"), SM90)
    assert not S.constraints(dict(row, NUM_SPLITS=2), M.Workload(1, 524288, 1, "dsv32"), SM90)
    # the split limits follow the GPU's SMs: 64 splits at B = 8 are within sm_90's 132, past 16 SMs'
    w = M.Workload(8, 131072, 1, "dsv32")
    c = dict(M.radix_config(w, SM90), NUM_SPLITS=64)
    assert S.constraints(c, w, SM90) and not S.constraints(c, w, Target("sm_90", 90, 16, SM90.smem))


def test_when_pins_the_knobs_a_config_ignores():
    """Each knob applies only where it does something (``when``): another top-k path's knobs,
    the mxfp4 decode for fp8 keys, the word decode without the FP8 MMA, the ranking block
    with the chunked placing, PDL off sm_90+, the register cap under the interpreter; the
    Gluon scoring only on sm_90 and then with its own mxfp4 decode (``snap``); SCORE_SAMPLE
    only with the Gluon scoring and the sampled first digit."""
    w, wm = M.Workload(32, 131072, 1, "dsv32"), M.Workload(32, 131072, 1, "dsv41-flash")
    canon = S.SPACE.canonical
    r = dict(M.radix_config(w, SM90), SCORE_GLUON=False, SCORE_SAMPLE=False)
    row = dict(r, TOPK_ALGO="row", TOPK_SPLITS=64, RADIX_FIRST="sampled", BOUND_GROUP=16, RANK_STEP=8192,
               LAUNCH_PDL=True, RANK_BLOCK=16, MX_FP8_DOT=True)
    assert canon(row, w, SM90) == dict(row, TOPK_SPLITS=1, RADIX_FIRST="byte", BOUND_GROUP=64, RANK_STEP=2048,
                                       LAUNCH_PDL=False, RANK_BLOCK=64, MX_FP8_DOT=False)
    b = dict(r, TOPK_ALGO="bound", PLACE_CHUNK=512, RADIX_FIRST="sampled", RANK_BLOCK=16)
    assert canon(b, w, SM90) == dict(b, PLACE_CHUNK=0, RADIX_FIRST="byte")
    assert canon(dict(r, PLACE_CHUNK=512, RANK_BLOCK=16), w, SM90)["RANK_BLOCK"] == 64
    assert canon(dict(r, LAUNCH_PDL=True), w, INTERPRETER)["LAUNCH_PDL"] is False
    assert canon(dict(r, SCORE_MAXNREG=96), w, INTERPRETER)["SCORE_MAXNREG"] == 0
    mx = dict(M.radix_config(wm, SM90), SCORE_GLUON=False, MX_FP8_DOT=False, MX_WORD_DECODE=True)
    assert canon(mx, wm, SM90)["MX_WORD_DECODE"] is False
    # the Gluon scoring: sm_90, BLOCK_N 64, 4 warps, 2+ stages, one token (the launcher's own test)
    g = dict(M.bound_config(M.Workload(1, 524288, 1, "dsv32"), SM90), num_stages=4, SCORE_GLUON=True)
    wg = M.Workload(1, 524288, 1, "dsv32")
    assert canon(g, wg, SM90) == g and S.constraints(g, wg, SM90)
    for bad, tgt in ((dict(g, BLOCK_N=128), SM90), (dict(g, num_warps=8), SM90), (dict(g, num_stages=1), SM90),
                     (g, SM100), (g, INTERPRETER)):
        assert canon(bad, wg, tgt)["SCORE_GLUON"] is False, (bad, tgt)
    assert canon(g, M.Workload(1, 524288, 2, "dsv32"), SM90)["SCORE_GLUON"] is False
    assert canon(dict(g, SCORE_MAXNREG=96), wg, SM90)["SCORE_MAXNREG"] == 0  # fp8: ~72 registers, no cap
    wgm = M.Workload(1, 524288, 1, "dsv41-flash")
    gm = dict(M.bound_config(wgm, SM90), SCORE_GLUON=True, MX_FP8_DOT=False, MX_WORD_DECODE=False, SCORE_MAXNREG=96)
    assert canon(gm, wgm, SM90) == dict(gm, MX_FP8_DOT=True, MX_WORD_DECODE=True)  # the Gluon kernel's decode
    s = dict(M.radix_config(w, SM90), SCORE_SAMPLE=True)
    assert s["SCORE_GLUON"] and s["RADIX_FIRST"] == "sampled" and canon(s, w, SM90) == s
    assert canon(dict(s, RADIX_FIRST="byte"), w, SM90)["SCORE_SAMPLE"] is False
    assert canon(dict(s, SCORE_GLUON=False), w, SM90)["SCORE_SAMPLE"] is False
    assert canon(s, w, SM100)["SCORE_SAMPLE"] is False
    # smem: the Gluon ring (mxfp4: the codes)
    assert S.smem_estimate(dict(g, num_stages=4), wg) == 1024 + 64 * 128 + 4 * 64 * 128
    assert S.smem_estimate(dict(gm, MX_FP8_DOT=True, num_stages=4), wgm) == 1024 + 32 * 128 + 4 * 64 * 64


def test_score_sample_zero_fills_the_row_state():
    """``_buffers`` zero-fills the radix state for SCORE_SAMPLE (a fill, not the scoring
    kernel's split 0, which other programs' atomics would race)."""
    fills = {}

    def alloc(shape, dtype, fill=None):
        fills[tuple(shape)] = fill
        return torch.empty(shape, dtype=dtype, device="meta")
    w = M.Workload(32, 131072, 1, "dsv32")
    for sample in (False, True):
        fills.clear()
        L._buffers(32, 1, 131072, 2048, False, dict(M.radix_config(w, SM90), SCORE_SAMPLE=sample), "meta",
                   alloc=alloc)
        assert fills[(32, int(C._RS.value))] == (0 if sample else None)


def _heads(inp: dict, h: int) -> dict:
    """The inputs with only the first ``h`` query heads (strided views, as a caller may pass)."""
    return dict(inp, q=inp["q"][:, :, :h], weights=inp["weights"][:, :, :h])


def test_gluon_scoring_refused_where_it_cannot_run(device):
    """SCORE_GLUON is a performance choice: one line of why where the Gluon scoring kernel
    cannot score a call, and the launcher then runs the Triton kernel with the same config
    (here, under the interpreter: the same indices as without the key)."""
    w = M.Workload(1, 700, 1, "dsv32")
    cfg = dict(M.bound_config(w, SM90), BLOCK_N=64, num_warps=4, num_stages=3)
    inp = ragged_inputs("dsv32", 1, [700], top_k=64, device=device)
    assert_equal("SCORE_GLUON where it cannot run", M.launch(config=dict(cfg, SCORE_GLUON=True), **inp),
                 M.launch(config=dict(cfg, SCORE_GLUON=False), **inp))

    def err(c, fmt="fp8", t=1, h=64, page=64, k=2048, logits=False, contiguous=True, target=SM90):
        return M.score_gluon_error(c, fmt, t, h, page, k, c["TOPK_ALGO"], target, logits, contiguous)

    assert err(cfg) is None and err(dict(cfg, TOPK_ALGO="radix")) is None
    assert err(cfg, k=0, logits=True) is None
    assert "neither indices nor logits" in err(cfg, k=0)
    assert err(cfg, fmt="mxfp4") is None and "one query token" in err(cfg, t=2) and "next_n=2" in err(cfg, t=2)
    assert "BLOCK_N=64" in err(dict(cfg, BLOCK_N=32)) and "BLOCK_N=64" in err(cfg, page=32)
    assert "num_warps=4" in err(dict(cfg, num_warps=8)) and "num_stages >= 2" in err(dict(cfg, num_stages=1))
    assert "at most 128 heads" in err(cfg, h=129) and err(cfg, h=128) is None
    assert "radix / bound" in err(dict(cfg, TOPK_ALGO="row"))
    assert "contiguous" in err(cfg, contiguous=False)
    assert "sm_90" in err(cfg, target=SM100) and "interpreter" in err(cfg, target=INTERPRETER)


def test_space_names_are_kernel_constexprs():
    import inspect

    names = {n for k in (SC._score_kernel, K._radix_pass_kernel, K._radix_place_kernel, K._radix_merge_rank_kernel,
                         K._row_topk_kernel, BD._bound_topk_kernel, BD._bound_place_kernel,
                         BD._bound_threshold_kernel)
             for n, prm in inspect.signature(k.fn).parameters.items() if prm.annotation in (tl.constexpr, "tl.constexpr")}
    # LAUNCH_PDL is a launch option (and the kernels' PDL constexpr), SCORE_MAXNREG the scoring launch's
    # maxnreg, SCORE_GLUON picks the scoring kernel (_gl_score_kernel or _score_kernel), SCORE_SAMPLE is
    # that kernel's SAMPLE (and drops a radix pass)
    assert set(S.SPACE) - {"num_warps", "num_stages", "LAUNCH_PDL", "SCORE_MAXNREG", "SCORE_GLUON",
                           "SCORE_SAMPLE"} <= names
    assert "SAMPLE" in M.lowering.constexpr_names(G._gl_score_kernel)
    assert "PDL" in names


@pytest.mark.parametrize("path, case", [("radix", RADIX_CASES[1]), ("radix", RADIX_CASES[4]),
                                        ("radix", RADIX_CASES[-1]), ("row", ROW_CASES[0]), ("row", ROW_CASES[-1]),
                                        ("bound", BOUND_CASES[0]), ("bound", BOUND_CASES[3])])
def test_scratch_never_read_before_written(path, case, device, monkeypatch):
    """Every uninitialised output and scratch buffer filled with 0x7F bytes (a huge finite
    score, a huge key, a huge count) instead of whatever ``torch.empty`` returns: a kernel
    that reads a score, key or counter it did not write picks the poison (a read of an
    unwritten score once failed CI only now and then)."""
    real = L._buffers

    def poisoned(*args, **kw):
        def alloc(shape, dtype, fill=None):
            if fill is not None:
                return torch.full(shape, fill, dtype=dtype, device=device)
            t = torch.empty(shape, dtype=dtype, device=device)
            t.view(torch.uint8).fill_(0x7F)
            return t
        return real(*args, **dict(kw, alloc=alloc))

    monkeypatch.setattr(L, "_buffers", poisoned)
    profile, next_n, seqs, top_k, over = case
    make = {"radix": rcfg, "row": rowcfg, "bound": bcfg}[path]

    def check(inp: dict, c: dict) -> None:
        idx = M.launch(config=c, **inp)
        if device == "cpu":
            assert_equal("topk_idx", idx, M.reference(**inp))
        else:
            M.verify(idx, M.reference(**inp), inp)

    check(ragged_inputs(profile, next_n, seqs, top_k=top_k, device=device), make(profile, next_n, **over))
    # the seq_len clamp, poisoned: query 0 must not read key max_len - 1 unwritten
    inp = ragged_inputs("dsv32", 2, [200, 90], top_k=40, context=256, device=device, seed=5)
    max_len = inp["block_table"].shape[1] * inp["k_cache"].shape[1]
    inp["seq_lens"] = torch.tensor([max_len + 37, 90], dtype=torch.int32, device=device)
    check(inp, make("dsv32", 2))


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


_LOWER = r"""
import json, os, sys
os.environ.pop("TRITON_INTERPRET", None)
import triton
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from kernel_templates import sparse_mqa as M
from tuner.runtime.target import Target
res = []
t = Target.named(sys.argv[1])
for prof, n in (("dsv32", 2), ("dsv41-flash", 1)):
    w, short = M.Workload(1, 131072, n, prof), M.Workload(1, 32768, n, prof)
    for w, cfg in ((w, M.radix_config(w, t)), (short, M.row_config(short, t)),
                   (w, dict(M.bound_config(w, t), RANK_STEP=2048, LAUNCH_PDL=True))):
      for fn, sig, cx in M.lower_signatures(w, cfg, t):
        c = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx), target=GPUTarget("cuda", t.cc, 32),
                           options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
        ptx = c.asm["ptx"]
        res.append([prof, fn.__name__, "tcgen05.mma" in ptx, cfg["TOPK_ALGO"], bool(cfg["LAUNCH_PDL"]),
                    "griddepcontrol.wait" in ptx, "griddepcontrol.launch_dependents" in ptx])
print(json.dumps(res))
"""


def test_lowers_for_sm100():
    """sm_100 (sm_90: test_default_configs_fit_sm90): the scoring MMA is tcgen05, no Gluon
    kernel is planned; every top-k path's kernels compile; with LAUNCH_PDL the scoring kernel
    lets the next launch start and the top-k kernels wait first."""
    res = run_clean(_LOWER, "sm_100", timeout=900)
    score = [r for r in res if r[1] == "_score_kernel"]
    assert len(score) == 6 and all(r[2] for r in score), "sm_100: the scoring MMA should be tcgen05"
    assert not any(r[1].startswith("_gl_") for r in res)
    assert all(r[6] and not r[5] for r in score if r[4]) and not any(r[5] or r[6] for r in res if not r[4])
    assert all(r[5] for r in res if r[4] and r[1] != "_score_kernel")
    for name in ("_radix_place_kernel", "_row_topk_kernel", "_bound_threshold_kernel", "_bound_topk_kernel",
                 "_bound_place_kernel"):
        assert sum(r[1] == name for r in res) == 2, name


_SM90 = r"""
import json, re
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernel_templates import sparse_mqa as M
from kernel_templates.sparse_mqa import scoring_gluon
from search_spaces.sparse_mqa import WORKLOADS
from tuner.runtime.target import Target
SM90 = Target.named("sm_90")
scoring_gluon.gluon_available = lambda t: False  # the Triton defaults (the Gluon kernel: its own tests)
from tests._cubin import usage as cubin_usage
seen = {}
for wl in WORKLOADS:
    cfg = M.default_config(wl, SM90)
    for fn, _grid, args in M._plan_for(wl, cfg, SM90):
        # As the JIT specializes on the GPU: pointers and 16-divisible ints get
        # tt.divisibility 16 (it sets vector widths), ints == 1 become constexprs.
        sig, cx = M.lowering.signature(fn, args)
        attrs = sig.attrs
        # NUM_SPLITS / TOPK_SPLITS only enter scalar index math, NEXT_N only the radix passes'
        # row -> sequence division: one compile per rest
        skip = ("NUM_SPLITS", "TOPK_SPLITS") + (("NEXT_N",) if fn.__name__ == "_radix_pass_kernel" else ())
        key = repr((fn.__name__, sorted(sig.items()), sorted((k, v) for k, v in cx.items() if k not in skip),
                    sorted(attrs), args["num_warps"], args["num_stages"]))
        if key in seen:
            continue
        c = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=cx, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": args["num_warps"], "num_stages": args["num_stages"]})
        ptx = c.asm["ptx"]
        usage = cubin_usage(c.asm["cubin"], stl=True)
        seen[key] = dict(fn=fn.__name__, wl=[wl.batch, wl.context, wl.next_n, wl.profile], cfg=cfg,
                         shared=c.metadata.shared, wgmma=sorted(set(re.findall(r"wgmma\.mma_async\S*", ptx))),
                         cp16=len(re.findall(r"cp\.async\.\w+\.shared\.global \[[^]]*\], \[[^]]*\], 0x10", ptx)),
                         cp8=len(re.findall(r"cp\.async\.\w+\.shared\.global \[[^]]*\], \[[^]]*\], 0x8", ptx)),
                         v4=len(re.findall(r"ld\.global(?:\.\w+)*\.v4", ptx)), usage=usage,
                         cx={k: v for k, v in cx.items() if k in ("PICK", "HIST", "FROM_LOGITS", "PLACE_CHUNK",
                                                                   "TOPK_ALGO", "RADIX_FIRST", "MODE")})
print(json.dumps(list(seen.values())))
"""


def test_default_configs_fit_sm90():
    """The distinct Triton kernels of the GPU grid's defaults compile for sm_90 (with the
    specialisation real launches get) within the target's shared memory and under
    ``smem_estimate``; the scoring MMA is FP8 wgmma for both key formats and its key tile
    arrives through 16-byte loads (cp.async or ld.global.v4; the mxfp4 word decode's
    per-scale-block loads are 8-byte cp.async); the top-k kernels do not spill, nor the
    scoring kernel with the row path's histogram (where cuobjdump is there to say: a chunk's
    sort keeps one word on the stack, stored once, re-read outside every loop)."""
    res = run_clean(_SM90, timeout=900)
    score = [r for r in res if r["fn"] == "_score_kernel"]
    assert {(r["wl"][2], r["wl"][3]) for r in score} == {(t, prof) for t in (1, 2) for prof in M.PROFILES}
    assert {r["fn"] for r in res} == {"_score_kernel", "_radix_pass_kernel", "_radix_place_kernel",
                                      "_radix_merge_rank_kernel", "_row_topk_kernel", "_bound_threshold_kernel",
                                      "_bound_topk_kernel", "_bound_place_kernel"}
    assert {r["cx"]["TOPK_ALGO"] for r in score} == {"radix", "row", "bound"}
    passes = [r for r in res if r["fn"] == "_radix_pass_kernel"]
    # the byte digits (six passes) and, from 32 rows at >= 128K, the sampled first digit (nine)
    assert {(r["cx"]["RADIX_FIRST"], r["cx"]["PICK"], r["cx"]["HIST"], r["cx"]["MODE"]) for r in passes} == {
        ("byte", -1, 0, 0), ("byte", 0, -1, 0), ("byte", -1, 1, 0), ("byte", 1, 2, 0), ("byte", 2, 3, 0),
        ("byte", 3, -1, 0), ("sampled", -1, 0, 1), ("sampled", 0, -1, 2), ("sampled", 0, -1, 3),
        ("sampled", -1, 1, 0), ("sampled", 1, 2, 0), ("sampled", 2, 3, 0), ("sampled", 3, 4, 0),
        ("sampled", 4, 5, 0), ("sampled", 5, -1, 0)}
    for r in res:
        assert r["shared"] <= SM90.smem, r
        if r["usage"]:
            sort = r["fn"] == "_radix_place_kernel" and r["cx"].get("PLACE_CHUNK")
            assert r["usage"]["stl"] <= (1 if sort else 0), r
    for r in score:
        wl = M.Workload(*r["wl"])
        assert r["shared"] <= S.smem_estimate(r["cfg"], wl), (r, S.smem_estimate(r["cfg"], wl))
        assert r["wgmma"] and all(i.endswith(".e4m3.e4m3") for i in r["wgmma"]), r
        if r["cfg"]["MX_WORD_DECODE"]:
            assert r["cp8"] + r["cp16"] > 0, r
        else:
            assert r["cp16"] + r["v4"] > 0, r
        if wl.profile == "dsv32":  # fp8 keys: q plus TWO key tiles in shared memory (RADIX_SCORE_STAGES)
            q_bytes = (1 if wl.next_n == 1 else 2) * M.PROFILES["dsv32"]["heads"] * M.D_INDEX
            assert r["shared"] >= q_bytes + 2 * r["cfg"]["BLOCK_N"] * M.D_INDEX, r


# the sm_90 compile of a config's scoring launch, shared by the lowering scripts below: the
# compiled kernel, its name, constexprs and registers / stack (cuobjdump)
_GL_COMPILE = r"""
import json, re, triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from kernel_templates import sparse_mqa as M
from tuner.runtime.target import Target
SM90 = Target.named("sm_90")
from tests._cubin import usage as cubin_usage


def compile_scoring(w, cfg):
    # the scoring launch planned and compiled for sm_90 as the JIT specialises it
    fn, _grid, args = M._plan_for(w, cfg, SM90)[0]
    sig, cx = M.lowering.signature(fn, args)
    k = triton.compile(GluonASTSource(fn=fn, signature=sig, constexprs=cx, attrs=sig.attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 1})
    use = cubin_usage(k.asm["cubin"])
    return k, fn.__name__, cx, use["reg"], use["stack"]
"""

_GL_LOWER = _GL_COMPILE + r"""
res = []
for b, ctx, algo, over in ((1, 524288, "bound", {"LAUNCH_PDL": True}), (32, 524288, "radix", {"LAUNCH_PDL": False}),
                           (1, 131072, "bound", {"BOUND_GROUP": 16, "num_stages": 2, "LAUNCH_PDL": False})):
    w = M.Workload(b, ctx, 1, "dsv32")
    cfg = dict(M.bound_config(w, SM90) if algo == "bound" else M.radix_config(w, SM90), BLOCK_N=64, num_warps=4,
               num_stages=5, SCORE_MAXNREG=0, SCORE_GLUON=True)
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
    the loop (two before it: the barrier inits, q), no local memory, at most 128 registers
    (four 4-warp programs an SM and more), shared memory = q + the ring + mbarriers +
    scratch, the PDL hint where LAUNCH_PDL asks for it."""
    res = run_clean(_GL_LOWER)
    assert [(x[0], x[1]) for x in res] == [("_gl_score_kernel", "bound"), ("_gl_score_kernel", "radix"),
                                          ("_gl_score_kernel", "bound")]
    for name, algo, reg, stack, n_wgmma, n_copy, pdl, shared, stages, fences in res:
        assert stack == 0 and reg <= 128, (algo, reg, stack)
        assert n_wgmma >= 4, "K = 128: four m64n64k32 FP8 wgmma a tile"
        assert n_copy >= 1, "the key tiles come by TMA"
        assert fences == 2, "two proxy fences, both before the loop: in the loop one waited for every load in flight"
        assert 64 * 128 + stages * 64 * 128 <= shared <= 64 * 128 + stages * 64 * 128 + 1024
    assert [x[6] for x in res] == [True, False, False]


_GL_LOWER_MX = _GL_COMPILE + r"""
res = []
for b, algo, stages in ((32, "radix", 4), (1, "bound", 3)):
    w = M.Workload(b, 524288, 1, "dsv41-flash")
    cfg = dict(M.bound_config(w, SM90) if algo == "bound" else M.radix_config(w, SM90), BLOCK_N=64, num_warps=4,
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
        cfg = dict(M.radix_config(w, SM90), SCORE_GLUON=True, SCORE_SAMPLE=sample, SCORE_MAXNREG=nreg, num_stages=3)
        names = [f.__name__ for f, _, _ in M._plan_for(w, cfg, SM90)]
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


@pytest.mark.gpu
@pytest.mark.parametrize("profile", ["dsv32", "dsv41-flash"])
def test_gpu_default_configs(profile, device):
    """The defaults on the GPU: 128 splits at B=4 16K and 512 at B=1 64K (two 64-key tiles a
    split), the row path's 32 at 8K (dsv41-flash); next_n 1 and 2."""
    t = Target.of(device)
    for w in (M.Workload(4, 16384, 1, profile), M.Workload(4, 16384, 2, profile), M.Workload(1, 65536, 1, profile),
              M.Workload(2, 8192, 2, profile)):
        inp = M.make_inputs(w, device, 0)
        M.verify(M.launch(config=M.default_config(w, t), **inp), M.reference(**inp), inp)


@pytest.mark.gpu
@pytest.mark.parametrize("group, rank_block", [(64, 16), (16, 64), (32, 32)])
def test_gpu_bound_path(group, rank_block, device):
    """The bound path on the GPU, where a row's programs (up to 256) append concurrently and
    the placing ranks across programs: exactly the top-k of its own logits, the same indices
    call after call and without the logits (the counts start from zero each call), valid
    against the reference; ragged rows, one shorter than top_k, next_n 2. (Not compared with
    the radix path's indices: its scoring kernel is another compile, whose scores may round
    differently, so near-ties at the k-th can swap.)"""
    t = Target.of(device)
    for w, lens in ((M.Workload(1, 524288, 1, "dsv32"), [524288]), (M.Workload(1, 131072, 1, "dsv32"), [100000]),
                    (M.Workload(2, 32768, 2, "dsv41-flash"), [32768, 300])):
        inp = M.make_inputs(w, device, 0)
        inp["seq_lens"] = torch.tensor(lens, dtype=torch.int32, device=device)
        k = M.PROFILES[w.profile]["top_k"]
        c = dict(M.bound_config(w, t), BOUND_GROUP=group, RANK_BLOCK=rank_block)
        assert c["TOPK_SPLITS"] > 1
        idx, logits = M.launch(config=c, **dict(inp, return_logits=True))
        assert_equal("bound vs its own logits", idx, M.topk_of_logits(logits, k))
        for _ in range(3):
            assert_equal("bound, call after call", M.launch(config=c, **inp), idx)
        M.verify(idx, M.reference(**inp), inp)


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["bound", "radix"])
def test_gpu_launch_pdl(path, device):
    """LAUNCH_PDL on the GPU (programmatic dependent launches, each waiting in _pdl_enter):
    the same indices as the plain launches of the same config, call after call and replayed
    in a CUDA graph (the serving form), at B=1 512K and on ragged next_n 2 rows."""
    t = Target.of(device)
    for w, lens in ((M.Workload(1, 524288, 1, "dsv32"), [524288]), (M.Workload(2, 32768, 2, "dsv41-flash"), [32768, 300])):
        inp = M.make_inputs(w, device, 0)
        inp["seq_lens"] = torch.tensor(lens, dtype=torch.int32, device=device)
        c = dict((M.radix_config if path == "radix" else M.bound_config)(w, t), LAUNCH_PDL=False)
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


@pytest.mark.gpu
def test_gpu_gluon_scoring_strided_cache_falls_back(device):
    """A key cache that is a strided view (no TMA descriptor of its rows) is scored by the
    Triton kernel under a SCORE_GLUON config: the same indices as without it, no error."""
    inp = ragged_inputs("dsv32", 1, [300, 77], top_k=64, device=device)
    wide = torch.zeros(*inp["k_cache"].shape[:2], 256, dtype=torch.uint8, device=device)
    wide[..., :128] = inp["k_cache"].view(torch.uint8)
    inp["k_cache"] = wide[..., :128].view(torch.float8_e4m3fn)
    assert not inp["k_cache"].is_contiguous()
    cfg = dict(M.bound_config(M.Workload(2, 300, 1, "dsv32"), SM90), BLOCK_N=64, num_warps=4, num_stages=2)
    assert_equal("SCORE_GLUON on a strided cache", M.launch(config=dict(cfg, SCORE_GLUON=True), **inp),
                 M.launch(config=dict(cfg, SCORE_GLUON=False), **inp))


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
def test_gpu_gluon_score_sample(device):
    """SCORE_SAMPLE on the GPU: the same indices as the sampled digit's own launch (the
    histogram is the same), call after call (the state is zero-filled each call), with PDL,
    and valid against the reference; ragged rows (an empty one, one shorter than k) and a
    sample that misleads (the sampled keys score ~100x the rest: the fallback appends)."""
    t = Target.of(device)
    for w, lens in ((M.Workload(4, 131072, 1, "dsv32"), [131072, 100001, 300, 0]),
                    (M.Workload(3, 131072, 1, "dsv41-flash"), [131072, 64 * 7 + 5, 70000])):
        inp = M.make_inputs(w, device, 0)
        inp["seq_lens"] = torch.tensor(lens, dtype=torch.int32, device=device)
        c = dict(M.radix_config(w, t), RADIX_FIRST="sampled", SCORE_GLUON=True, BLOCK_N=64, num_warps=4,
                 num_stages=3, SCORE_MAXNREG=0, TOPK_SPLITS=8, SCORE_SAMPLE=False)
        s = dict(c, SCORE_SAMPLE=True)
        want = M.launch(config=c, **inp)
        for _ in range(2):
            assert_equal("SCORE_SAMPLE vs the sampling launch", M.launch(config=s, **inp), want)
        assert_equal("SCORE_SAMPLE with PDL", M.launch(config=dict(s, LAUNCH_PDL=True), **inp), want)
        M.verify(want, M.reference(**inp), inp)
        bad = _misleading_sample(inp, w.profile)
        assert_equal("SCORE_SAMPLE, misleading sample", M.launch(config=s, **bad), M.launch(config=c, **bad))


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
    t = Target.of(device)
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
            base = M.radix_config(w, t)
        else:
            base = M.bound_config(w, t)
        c = dict(base, BLOCK_N=64, num_warps=4, num_stages=5, SCORE_MAXNREG=0, SCORE_SAMPLE=False)
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
            gm_want, gm_got = _run_plan(inp, c, k, device)["gmax"], _run_plan(inp, g, k, device)["gmax"]
            for b, n in enumerate(lens):
                ng = -(-n // grp)
                torch.testing.assert_close(gm_got[b, :ng], gm_want[b, :ng], rtol=1e-5,
                                           atol=1e-6 * float(gm_want[b, :ng].abs().max()) if ng else 0.0)
