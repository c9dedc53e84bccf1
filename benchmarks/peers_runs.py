"""The GPU side of ``benchmarks/peers.py``: per family and shape, our kernel (the active pack's config
through ``tuner.runtime``) and the peers' on the same inputs converted to their layouts
(``peers_layouts``), each first checked against our reference with the family's own ``verify``,
then timed the same way (``tuner.timing.bench``: CUDA-graph replay where our kernel is
launch-bound, the L2 flushed where its inputs come from HBM) in interleaved rounds. Where ours
is slower, each side's launches are profiled (CUPTI, ``kernel_breakdown``)."""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import peers_layouts as L
import torch
from peers_core import Pair, candidate, pair_rows

log = logging.getLogger("bench.peers")
VERIFY_SEQS = 4  # sequences (attention: 2) checked against the per-sequence reference
SINK_NOTE = "FlashMLA's dense kernels take no sink: it is applied to their output from the returned lse (a torch op, timed)"


@dataclass
class Cand:
    """One candidate of a shape: ``fn`` times it, ``check`` compares its output with the reference
    (AssertionError: disagrees); or, without ``fn``, ``status`` and ``error`` say why it is not run."""

    fn: Callable[[], Any] | None = None
    check: Callable[[], None] | None = None
    status: str = "ok"
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Ctx:
    """What every shape's run needs: the loaded peers (module or None) and their load errors, the
    rounds and repetitions, whether to profile where ours is slower."""

    peers: dict[str, Any]
    errors: dict[str, str | None]
    rounds: int = 5
    reps: int = 50
    breakdown: bool = True
    device: str = "cuda"  # "cpu": the Triton interpreter (a smoke test of the harness; times not meaningful)

    def peer(self, module: str) -> tuple[Any, Cand | None]:
        """The module, or None and the ``unavailable`` candidate carrying its load error."""
        m = self.peers.get(module)
        if m is None:
            return None, Cand(status="unavailable", error=f"{module}: {self.errors.get(module) or 'not loaded'}")
        return m, None


def config(kernel: str, workload: dict[str, Any], device: str = "cuda") -> tuple[dict[str, Any], str]:
    """Our config for the workload from the active pack (``runtime.use_pack``), else the default."""
    from tuner import runtime
    from tuner.runtime.target import Target

    sel = runtime.select(kernel, workload, Target.of(device))
    return dict(sel.config), sel.how


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".strip()


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _time(fns: dict[str, Callable[[], Any]], spec: Any, ctx: Ctx) -> tuple[dict[str, list[float]], str]:
    """Interleaved rounds: in each, every candidate timed once by ``tuner.timing.bench`` (graph replay
    where ``spec.launch_bound``, the L2 flushed where ``spec.cold_l2``). Where a candidate cannot be
    captured in a CUDA graph, every candidate of the shape is timed with events instead."""
    from tuner.timing import bench

    for graph in ((True, False) if spec.launch_bound else (False,)):
        rounds: dict[str, list[float]] = {n: [] for n in fns}
        try:
            for _ in range(ctx.rounds):
                for name, fn in fns.items():
                    rounds[name].append(bench(fn, graph=graph, flush_l2=spec.cold_l2, reps=ctx.reps).median_us)
            return rounds, "graph replay" if graph else "events"
        except RuntimeError as e:  # a capture the peer (or ours) does not support: time every candidate with events
            if not graph:
                raise
            _sync()
            log.info("graph capture failed (%s): events for every candidate of the shape", _err(e).splitlines()[0])
    raise AssertionError("unreachable")


def _breakdown(fn: Callable[[], Any], spec: Any) -> dict[str, Any]:
    """Each kernel one call launches, CUPTI device us, slowest first (``kernel_breakdown``)."""
    from kernel_breakdown import _profile, kernel_times

    from tuner import timing

    calls = 10
    flush = timing._flush_l2 if spec.cold_l2 else None
    skip = {n for n, _ in _profile(lambda: None, 3, flush)} if flush else set()
    rows = kernel_times(_profile(fn, calls, flush), calls, skip)
    return {"kernels_us": sum(r[2] for r in rows), "launches": sum(r[1] for r in rows),
            "kernels": [{"name": n[:120], "per_call": c, "us": u} for n, c, u in rows]}


def reason(b: dict[str, Any]) -> str:
    """One line from a row's breakdown: each side's launches and kernel time, its slowest kernel."""
    def side(name: str) -> str:
        s = b.get(name)
        if not s:
            return f"{name}: no breakdown"
        top = s["kernels"][0] if s["kernels"] else {"name": "-", "us": 0.0}
        return (f"{name} {s['launches']:.0f} launches, {s['kernels_us']:.1f} us in kernels "
                f"(slowest {top['name'][:40]} {top['us']:.1f} us)")
    return f"{side('ours')}; {side('peer')}"


def finish(family: str, shape: dict[str, Any], spec: Any, cands: dict[str, Cand], pairs: list[Pair],
           ctx: Ctx) -> dict[str, Any]:
    """Check every candidate, time the ones that agree, build the rows, profile where ours is slower."""
    out: dict[str, dict[str, Any]] = {}
    live: dict[str, Callable[[], Any]] = {}
    for name, c in cands.items():
        if c.fn is None:
            out[name] = candidate(c.status, error=c.error, **c.extra)
            continue
        try:
            if c.check is not None:
                c.check()
            _sync()
        except AssertionError as e:
            out[name] = candidate("mismatch", error=str(e), **c.extra)
            continue
        except Exception as e:  # noqa: BLE001 - a peer's call may raise anything: recorded, the shape goes on
            out[name] = candidate("error", error=_err(e), **c.extra)
            _sync()
            continue
        live[name] = c.fn
    method = None
    if live:
        try:
            times, method = _time(live, spec, ctx)
            for name in live:
                out[name] = candidate("ok", times[name], **cands[name].extra)
        except Exception as e:  # noqa: BLE001
            for name in live:
                out[name] = candidate("error", error=f"while timed: {_err(e)}", **cands[name].extra)
    rows = pair_rows(family, shape, out, pairs)
    if ctx.breakdown:
        for r in rows:
            if r["ratio"] is not None and r["ratio"] < 1:
                try:
                    r["breakdown"] = {"ours": _breakdown(live[r["ours"]], spec), "peer": _breakdown(live[r["peer"]], spec)}
                    r["reason"] = reason(r["breakdown"])
                except Exception as e:  # noqa: BLE001 - the profiler is best effort
                    r["reason"] = f"breakdown failed: {_err(e)}"
    return {"shape": shape, "timing": method, "candidates": out, "rows": rows}


def _first(x: Any) -> Any:
    return x[0] if isinstance(x, (tuple, list)) else x


# ----------------------------------------------------------------------------- sparse MQA


def run_sparse_mqa(shape: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    """DeepGEMM's paged MQA logits (then ``torch.topk``) against our scoring alone and our whole call."""
    from kernel_templates import sparse_mqa as M
    from tuner.spec import workload_dict

    w = M.Workload(batch=shape["batch"], context=shape["context"], next_n=shape["next_n"], profile=shape["profile"])
    why = M.feasible(w)
    if why:
        return {"shape": shape, "skipped": why, "candidates": {}, "rows": []}
    cfg, how = config("sparse_mqa", workload_dict(w), ctx.device)
    inputs = M.make_inputs(w, ctx.device, 0)
    k = inputs["top_k"]
    sub = dict(inputs, **{n: inputs[n][:VERIFY_SEQS] for n in ("q", "weights", "block_table", "seq_lens")})
    sub_l = dict(sub, return_logits=True)
    ref_idx, ref_logits = M.reference(**sub_l)
    score_only = dict(inputs, top_k=0, return_logits=True)

    def ours_scoring() -> Any:
        return M.launch(config=cfg, **score_only)

    def ours_call() -> Any:
        return M.launch(config=cfg, **inputs)

    def check_scoring() -> None:  # the logits, and the exact top-k of them (-1 past a short row)
        lg = ours_scoring()[1][:VERIFY_SEQS]
        idx = M.topk_of_logits(lg, k)
        idx = torch.cat([idx, idx.new_full((*idx.shape[:-1], k - idx.shape[-1]), -1)], dim=-1)
        M.verify((idx, lg), (ref_idx, ref_logits), sub_l)

    cands = {"ours scoring": Cand(ours_scoring, check_scoring, extra={"config_from": how}),
             "ours scoring + top-k": Cand(ours_call, lambda: M.verify(ours_call()[:VERIFY_SEQS], ref_idx, sub),
                                          extra={"config_from": how})}
    dg, missing = ctx.peer("deep_gemm")
    if missing:
        cands["deepgemm logits"] = cands["deepgemm logits + torch.topk"] = missing
    else:
        fused = L.deepgemm_fused_kv(inputs["k_cache"], inputs["k_scales"])
        lens = L.context_lens_2d(inputs["seq_lens"], w.next_n)
        B, T, H, _ = inputs["q"].shape
        weights = inputs["weights"].reshape(B * T, H).contiguous()
        bt, max_len = inputs["block_table"], inputs["block_table"].shape[1] * M.PAGE
        meta = dg.get_paged_mqa_logits_metadata(lens, M.PAGE, dg.get_num_sms())
        # FP8 queries through the FP8 entry point, with no query scale: DeepGEMM 0.1.5's
        # fp8_fp4_paged_mqa_logits takes its FP4-query path whenever given a scale, and that path
        # asserts sm_100 / sm_120; its FP8 path has sm_90 kernels (64-token pages there)
        q = inputs["q"]

        def dg_logits() -> Any:
            return dg.fp8_paged_mqa_logits(q, fused, weights, lens, bt, meta, max_len)

        def dg_topk() -> Any:
            return L.topk_from_logits(L.mask_logits(dg_logits(), lens), k)

        def check_logits() -> None:
            lg = L.mask_logits(dg_logits(), lens)[:VERIFY_SEQS]
            M.verify((L.topk_from_logits(lg, k), lg), (ref_idx, ref_logits), sub_l)

        cands["deepgemm logits"] = Cand(dg_logits, check_logits, extra={"kv_bytes": L.DG_BYTES})
        cands["deepgemm logits + torch.topk"] = Cand(dg_topk, lambda: M.verify(dg_topk()[:VERIFY_SEQS], ref_idx, sub),
                                                     extra={"kv_bytes": L.DG_BYTES})
        cands["deepgemm metadata"] = Cand(lambda: dg.get_paged_mqa_logits_metadata(lens, M.PAGE, dg.get_num_sms()))
    pairs = [Pair("deepgemm logits", "ours scoring", "both write the fp32 logits of every visible key"),
             Pair("deepgemm logits + torch.topk", "ours scoring + top-k",
                  "the peer's top-k is torch.topk over its logits masked past each sequence (no engine top-k kernel "
                  "is carried); its schedule metadata (timed apart as 'deepgemm metadata') is computed once a step")]
    res = finish("sparse_mqa", shape, M.SPEC, cands, pairs, ctx)
    res["config"] = cfg
    return res


# ----------------------------------------------------------------------------- attention


def _attn_slice(inp: dict[str, Any], n: int) -> dict[str, Any]:
    keys = ("q", "block_table", "seq_lens", "swa_kv", "swa_scales") + (("topk_idx",) if inp["topk_idx"] is not None else ())
    return dict(inp, **{k: inp[k][:n] for k in keys})


def _chunks(n: int, step: int) -> list[slice]:
    return [slice(i, min(n, i + step)) for i in range(0, n, step)]


def _fp8_latents(inp: dict[str, Any], rows: slice) -> torch.Tensor:
    from kernel_templates.nvfp4 import dequantize_fp8_ue8m0

    return dequantize_fp8_ue8m0(inp["kv_codes"][rows], inp["kv_scales"][rows])


def _flashmla_dense_fp8(fm: Any, inp: dict[str, Any], tau: float) -> tuple[Callable[[], Any], dict[str, Any], float]:
    """FlashMLA's dense FP8 decode (576-wide entries, per-tensor power-of-two scales, FP8 q) over our
    FP8 cache with the SWA window appended to each sequence; the sink from the lse. Returns the call,
    the reference inputs of what it computes (q as its FP8 holds it) and the cache's conversion error."""
    from kernel_templates.nvfp4 import dequantize_fp8_ue8m0, ue8m0_to_float

    codes, scales = inp["kv_codes"], inp["kv_scales"]
    P, page, D = codes.shape
    amax = torch.zeros((), device=codes.device)
    for s in _chunks(P, 4096):  # the cache's largest value: codes x scales, a chunk of pages at a time
        blk = codes[s].float().view(-1, page, D // 32, 32).abs().amax(-1) * ue8m0_to_float(scales[s])
        amax = torch.maximum(amax, blk.max())
    window = dequantize_fp8_ue8m0(inp["swa_kv"], inp["swa_scales"])
    amax = torch.maximum(amax, window.abs().max())
    sk = L.pow2_scale(amax.reshape(1), floor=2.0 ** -126)
    B, W = window.shape[:2]
    cache = torch.empty(P + B * (W // page), page, 1, L.DENSE_FP8_D, dtype=torch.float8_e4m3fn, device=codes.device)
    err = 0.0
    for s in _chunks(P, 4096):
        x = _fp8_latents(inp, s)
        c, _ = L.pow2_fp8(x, L.DENSE_FP8_D, sk)
        cache[s, :, 0] = c
        err = max(err, L.max_abs_err(L.unpow2_fp8(c, sk, D), x))
    wc, _ = L.pow2_fp8(window, L.DENSE_FP8_D, sk)
    cache[P:, :, 0] = wc.view(-1, page, L.DENSE_FP8_D)
    bt = torch.cat([inp["block_table"], torch.arange(P, P + B * (W // page), dtype=torch.int32,
                                                     device=codes.device).view(B, -1)], dim=1).contiguous()
    lens = (inp["seq_lens"] + inp["seq_lens"].clamp(max=W)).to(torch.int32)
    q = inp["q"]
    qc, sq = L.pow2_fp8(q, L.DENSE_FP8_D)
    qc = qc.unsqueeze(1).contiguous()
    sched = fm.get_mla_metadata()[0]
    sched.tile_scheduler_metadata, sched.num_splits = fm.get_mla_decoding_metadata(
        lens, q.shape[1], 1, is_fp8_kvcache=True, use_legacy=True)
    sink = inp["sink"]

    def call() -> Any:
        o, lse = fm.flash_mla_with_kvcache(qc, cache, bt, lens, 512, sched, softmax_scale=tau, is_fp8_kvcache=True,
                                           use_legacy=True, descale_q=sq, descale_k=sk)
        return (o[:, 0].float() * torch.sigmoid(lse[:, :, 0] - sink)[..., None]).to(torch.bfloat16)

    ref_in = dict(inp, q=L.unpow2_fp8(qc[:, 0], sq, D).to(torch.bfloat16), sm_scale=tau)
    return call, ref_in, err


def _flashmla_dense_bf16(fm: Any, inp: dict[str, Any], tau: float) -> Callable[[], Any]:
    """FlashMLA's dense bf16 decode over our bf16 cache with the SWA window appended (exact in bf16)."""
    from kernel_templates.nvfp4 import dequantize_fp8_ue8m0

    window = dequantize_fp8_ue8m0(inp["swa_kv"], inp["swa_scales"], dtype=torch.bfloat16)
    cache, bt = L.append_pages(inp["kv_codes"], inp["block_table"], window)
    cache = cache.unsqueeze(2)
    lens = (inp["seq_lens"] + inp["seq_lens"].clamp(max=window.shape[1])).to(torch.int32)
    q, sink = inp["q"].unsqueeze(1).contiguous(), inp["sink"]
    sched = fm.get_mla_metadata()[0]

    def call() -> Any:
        o, lse = fm.flash_mla_with_kvcache(q, cache, bt, lens, 512, sched, softmax_scale=tau, is_fp8_kvcache=False,
                                           use_legacy=True)
        return (o[:, 0].float() * torch.sigmoid(lse[:, :, 0] - sink)[..., None]).to(torch.bfloat16)

    return call


def _flashmla_sparse_v4(fm: Any, inp: dict[str, Any], tau: float) -> tuple[Callable[[], Any], float]:
    """FlashMLA's DeepSeek-V4 sparse decode (584 B a token) over our FP8 cache converted to its format,
    the SWA window as its extra cache, our sink; returns the call and the conversion error."""
    from kernel_templates.nvfp4 import dequantize_fp8_ue8m0

    codes = inp["kv_codes"]
    P, page, _ = codes.shape
    buf = torch.zeros(P, L.v4_page_stride(page), dtype=torch.uint8, device=codes.device)
    err = 0.0
    for s in _chunks(P, 4096):
        x = _fp8_latents(inp, s)
        c = L.pack_v4(x, out=buf[s])
        err = max(err, L.max_abs_err(L.unpack_v4(c), x))
    cache = buf[:, :page * L.V4_BYTES].view(P, page, 1, L.V4_BYTES)
    window = dequantize_fp8_ue8m0(inp["swa_kv"], inp["swa_scales"])
    extra, extra_idx = L.window_as_extra_cache(window, page)
    err = max(err, L.max_abs_err(L.unpack_v4(extra).view_as(window), window))
    cache, extra = cache.view(torch.float8_e4m3fn), extra.view(torch.float8_e4m3fn)  # the dtype FlashMLA's tests pass
    idx = L.physical_indices(inp["topk_idx"], inp["block_table"], page)
    q = inp["q"].unsqueeze(1).contiguous()
    sched = fm.get_mla_metadata()[0]

    def call() -> Any:
        o, _ = fm.flash_mla_with_kvcache(q, cache, None, None, 512, sched, softmax_scale=tau, is_fp8_kvcache=True,
                                         indices=idx, attn_sink=inp["sink"], extra_k_cache=extra,
                                         extra_indices_in_kvcache=extra_idx, use_legacy=True, kv_format="V4")
        return o[:, 0]

    return call, err


def run_attention(shape: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    """FlashMLA's decode kernels against ours (nvfp4, fp8, bf16) at the same heads, context and batch;
    every side attends the same entries: the global ones (dense: all; sparse: the top-512), the SWA
    window and the sink."""
    from kernel_templates import nvfp4_attention as A
    from tuner.spec import workload_dict

    nv = 2
    mode, H = shape["mode"], shape["heads"]
    tau = A.D_LATENT ** -0.5
    dtypes = ("nvfp4", "fp8", "bf16") if mode == "dense" else ("nvfp4", "fp8")
    cands: dict[str, Cand] = {}
    ins: dict[str, dict[str, Any]] = {}
    refs: dict[str, Any] = {}
    for dt in dtypes:
        w = A.Workload(batch=shape["batch"], context=shape["context"], heads=H, kv_dtype=dt, mode=mode)
        why = A.feasible(w)
        if why:
            cands[f"ours {dt}"] = Cand(status="unsupported", error=why)
            continue
        cfg, how = config("nvfp4_attention", workload_dict(w), ctx.device)
        inp = ins[dt] = dict(A.make_inputs(w, ctx.device, 0), sm_scale=tau)
        sub = _attn_slice(inp, nv)
        refs[dt] = A.reference(**sub)

        def fn(cfg=cfg, inp=inp) -> Any:
            return A.launch(config=cfg, **inp)

        cands[f"ours {dt}"] = Cand(fn, lambda fn=fn, dt=dt, sub=sub: A.verify(fn()[:nv], refs[dt], sub),
                                   extra={"kv_bytes": A.BYTES_PER_ENTRY[dt], "config_from": how})
    fm, missing = ctx.peer("flash_mla")
    names = (["flashmla dense fp8", "flashmla dense bf16"] if mode == "dense" else ["flashmla sparse v4"])
    for n in names:
        if missing:
            cands[n] = missing
            continue
        try:
            if n == "flashmla dense fp8" and "fp8" in ins:
                call, ref_in, err = _flashmla_dense_fp8(fm, ins["fp8"], tau)
                sub = _attn_slice(ref_in, nv)
                ref = A.reference(**sub)
                cands[n] = Cand(call, lambda call=call, ref=ref, sub=sub: A.verify(call()[:nv], ref, sub),
                                extra={"kv_bytes": L.DENSE_FP8_D, "kv_conversion_max_err": err})
            elif n == "flashmla dense bf16" and "bf16" in ins:
                call = _flashmla_dense_bf16(fm, ins["bf16"], tau)
                sub = _attn_slice(ins["bf16"], nv)
                cands[n] = Cand(call, lambda call=call, sub=sub: A.verify(call()[:nv], refs["bf16"], sub),
                                extra={"kv_bytes": 2 * A.D_LATENT})
            elif n == "flashmla sparse v4" and "fp8" in ins:
                call, err = _flashmla_sparse_v4(fm, ins["fp8"], tau)
                sub = _attn_slice(ins["fp8"], nv)
                cands[n] = Cand(call, lambda call=call, sub=sub: A.verify(call()[:nv], refs["fp8"], sub),
                                extra={"kv_bytes": L.V4_BYTES, "kv_conversion_max_err": err})
        except Exception as e:  # noqa: BLE001 - a conversion or metadata call the peer refuses
            cands[n] = Cand(status="error", error=_err(e))
    fp8_note = ("FlashMLA's dense FP8 kernel is the 576-wide V3 one: our 512 values and 64 zero columns, q in FP8 "
                "with one scale; " + SINK_NOTE)
    pairs = [Pair("flashmla dense fp8", "ours nvfp4", fp8_note), Pair("flashmla dense fp8", "ours fp8", fp8_note),
             Pair("flashmla dense bf16", "ours bf16", SINK_NOTE), Pair("flashmla dense bf16", "ours nvfp4", SINK_NOTE),
             Pair("flashmla sparse v4", "ours nvfp4", "the peer's DeepSeek-V4 format: 448 FP8 + 64 bf16 values a "
                  "token; the SWA window as its extra cache"),
             Pair("flashmla sparse v4", "ours fp8", "the peer's DeepSeek-V4 format: 448 FP8 + 64 bf16 values a "
                  "token; the SWA window as its extra cache")]
    return finish("attention", shape, A.SPEC, cands, pairs, ctx)


# ----------------------------------------------------------------------------- mHC


def _mhc_h_reference(X: torch.Tensor, inp: dict[str, Any]) -> torch.Tensor:
    """``h = sum_i pre_i X_i`` (float64) from our reference's coefficients: what the peers' pre returns
    (ours goes on to ``RMSNorm(h) * norm_w``)."""
    from kernel_templates.mhc.reference import coeffs_from_mix

    Xd = X.double()
    x = Xd.flatten(1)
    eps = inp["eps"]
    mix = (x @ inp["fn"].double().t()) * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    pre, _, _ = coeffs_from_mix(mix, inp["scale"], inp["base"], eps, inp["sinkhorn_iters"])
    return (pre[:, :, None] * Xd).sum(1)


def _check_pre(h: torch.Tensor, post: torch.Tensor, comb: torch.Tensor, X: torch.Tensor, ref_post: torch.Tensor,
               ref_comb: torch.Tensor, inp: dict[str, Any]) -> None:
    """A peer's pre outputs against our reference: ``post`` / ``comb`` by ``mhc.verify``'s bound, ``h``
    within one bf16 ulp plus its absolute slack."""
    from kernel_templates.mhc import BF16_ATOL, COEFF_ATOL, bf16_ulp
    from tuner.verify import assert_close

    T = X.shape[0]
    assert_close("post", post.reshape(T, 4).float(), ref_post.float(), atol=COEFF_ATOL)
    assert_close("comb", comb.reshape(T, 4, 4).float(), ref_comb.float(), atol=COEFF_ATOL)
    r = _mhc_h_reference(X, inp).float()
    atol = BF16_ATOL * max(1.0, float(r.abs().max()) if r.numel() else 1.0)
    assert_close("h", h.reshape(T, -1).float(), r, atol=bf16_ulp(r).float() + atol)


def run_mhc(shape: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    """tile-kernels' pre (fused, and the four-kernel path), DeepGEMM's prenorm GEMM with tile-kernels'
    fused rest, and tile-kernels' post, against ``mhc_pre`` / ``mhc_post`` / ``mhc_seam``."""
    from kernel_templates import mhc as H
    from tuner.spec import workload_dict

    op, T, D = shape["op"], shape["tokens"], shape["dim"]
    w = H.Workload(op=op, tokens=T, dim=D)
    cfg, how = config("mhc", workload_dict(w), ctx.device)
    inp = H.make_inputs(w, ctx.device, 0)
    ref = H.reference(**inp)
    cands = {f"ours {op}": Cand(lambda: H.launch(config=cfg, **inp), lambda: H.verify(H.launch(config=cfg, **inp), ref, inp),
                                extra={"config_from": how})}
    _, tk_missing = ctx.peer("tile_kernels")  # its modules are imported where used
    dg, dg_missing = ctx.peer("deep_gemm")
    eps, iters = inp.get("eps", 1e-6), inp.get("sinkhorn_iters", 20)
    splits = 16

    def tk_post() -> Any:
        from tile_kernels.mhc.post_kernel import mhc_post_fwd
        return mhc_post_fwd(inp["y"][None], inp["X"][None], inp["post"][None, :, :, None].contiguous(), inp["comb"][None])[0]

    def pre_fused(X: torch.Tensor) -> Any:
        from tile_kernels.modeling.mhc.ops.pre_big_fuse import mhc_pre_big_fuse
        post, comb, h = mhc_pre_big_fuse(X[None], inp["fn"], inp["scale"], inp["base"], rms_eps=eps, mhc_pre_eps=eps,
                                         mhc_sinkhorn_eps=eps, mhc_post_mult_value=2.0, sinkhorn_repeat=iters)
        return h, post, comb

    def pre_four(X: torch.Tensor) -> Any:
        from tile_kernels.modeling.mhc.functional import mhc_pre
        with torch.enable_grad():  # tile-kernels' mhc_pre takes its four-kernel path while gradients are on
            h, (post, comb) = mhc_pre(X[None], inp["fn"], inp["scale"], inp["base"], norm_eps=eps, post_mult_value=2.0,
                                      pre_eps=eps, sinkhorn_eps=eps, sinkhorn_repeat=iters)
        return h, post, comb

    def pre_dg(X: torch.Tensor) -> Any:
        from tile_kernels.mhc.pre_big_fuse_kernel import _mhc_pre_big_fuse
        Tn = X.shape[0]
        d = torch.empty(splits, Tn, H.N_MIX, dtype=torch.float32, device=X.device)
        sq = torch.empty(splits, Tn, dtype=torch.float32, device=X.device)
        dg.tf32_hc_prenorm_gemm(X.view(Tn, 4 * D), inp["fn"], d, sq, splits)
        post = torch.empty(Tn, 4, dtype=torch.float32, device=X.device)
        comb = torch.empty(Tn, 16, dtype=torch.float32, device=X.device)
        h = torch.empty(Tn, D, dtype=torch.bfloat16, device=X.device)
        _mhc_pre_big_fuse(D, eps, eps, eps, 2.0, iters, n_splits=splits, mhc_mult=4)(d, sq, inp["scale"], inp["base"],
                                                                                   X, post, comb, h)
        return h, post, comb

    pres = {"tk fused pre": (pre_fused, tk_missing), "tk pre (4 kernels)": (pre_four, tk_missing),
            "deepgemm gemm + tk fused pre": (pre_dg, tk_missing or dg_missing)}
    if op == "post":
        cands["tk post"] = tk_missing or Cand(tk_post, lambda: H.verify(tk_post(), ref, inp))
    elif op == "pre":
        for name, (f, miss) in pres.items():
            cands[name] = miss or Cand(lambda f=f: f(inp["X"]),
                                       lambda f=f: _check_pre(*f(inp["X"]), inp["X"], ref[1], ref[2], inp))
    else:  # seam: the peer's post, then its pre on the new residual
        for name, (f, miss) in pres.items():
            if name == "tk pre (4 kernels)":
                continue

            def seam(f=f) -> Any:
                xn = tk_post()
                return (xn, *f(xn))

            def check(seam=seam) -> None:
                xn, h, post, comb = seam()
                H.verify(xn, ref[0], dict(inp, op="post"))
                _check_pre(h, post, comb, ref[0].to(torch.bfloat16), ref[2], ref[3], inp)

            cands[f"tk post + {name}"] = miss or Cand(seam, check)
    note = "the peer's pre stops at h = sum_i pre_i X_i; ours also applies RMSNorm(h) * norm_w"
    pairs = [Pair("tk post", "ours post")] + [Pair(n, f"ours {op}", note) for n in cands if n.startswith("tk") and n != "tk post"]
    pairs += [Pair(n, f"ours {op}", note) for n in cands if n.startswith("deepgemm")]
    return finish("mhc", shape, H.SPEC, cands, pairs, ctx)


# ----------------------------------------------------------------------------- Engram hash


def run_engram(shape: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    """tile-kernels' ``engram_hash`` (n-gram ids given; and with the ids built by torch) against ours,
    which gathers the compressed ids and builds the n-grams itself."""
    from kernel_templates import engram as E
    from kernel_templates.engram.hashing import make_params, token_shape, zipf_tokens
    from kernel_templates.engram.reference import reference_hash

    p = make_params(8 * 2**20, seed=0, device=ctx.device)
    tokens = zipf_tokens(token_shape(shape["tokens"]), seed=0).to(ctx.device)
    args = (tokens, p["comp"], p["multipliers"], p["primes"], p["offsets"])
    want = reference_hash(*args, pad_id=p["pad_id"]).reshape(-1, 24)

    def ours() -> Any:
        return E.engram_hash(*args, pad_id=p["pad_id"])

    def same(got: torch.Tensor) -> None:
        if not torch.equal(got.reshape(-1, 24).long(), want):
            bad = (got.reshape(-1, 24).long() != want).nonzero()[:3].tolist()
            raise AssertionError(f"rows differ from the reference at (token, column) {bad}")

    cands = {"ours engram_hash": Cand(ours, lambda: same(ours()))}
    tk, missing = ctx.peer("tile_kernels")
    if missing:
        cands["tk engram_hash"] = cands["torch n-grams + tk engram_hash"] = missing
    else:
        mult, sizes, offs = L.tk_hash_params(p["multipliers"], p["primes"], p["offsets"])
        ids = L.ngram_ids(tokens, p["comp"], p["pad_id"])

        def peer() -> Any:
            return tk.engram.engram_hash(ids, mult, sizes, offs)

        def peer_built() -> Any:
            return tk.engram.engram_hash(L.ngram_ids(tokens, p["comp"], p["pad_id"]), mult, sizes, offs)

        cands["tk engram_hash"] = Cand(peer, lambda: same(peer()[0]))
        cands["torch n-grams + tk engram_hash"] = Cand(peer_built, lambda: same(peer_built()[0]))
    pairs = [Pair("tk engram_hash", "ours engram_hash",
                  "the peer reads the n-gram ids built beforehand; ours gathers the compressed ids and builds them"),
             Pair("torch n-grams + tk engram_hash", "ours engram_hash", "the n-gram ids built by torch ops, timed")]
    return finish("engram", shape, E.SPEC, cands, pairs, ctx)


# ----------------------------------------------------------------------------- MoE routing


def run_moe_routing(shape: dict[str, Any], ctx: Ctx) -> dict[str, Any]:
    """tile-kernels' ``top2_sum_gate`` (scoring, groups, top-k, weights) and ``topk_gate`` (top-k of
    given scores) against our routing (with the align layout) and its top-k part alone (the
    floor ladder's top-k kernel, one group only)."""
    from moe_floor_ladder import _kernels

    from kernel_templates import moe_routing as MR
    from kernel_templates.moe_routing.reference import MoeRouting, reference_align
    from tuner.spec import workload_dict

    w = MR.Workload(tokens=shape["tokens"], profile=shape["profile"])
    cfg, how = config("moe_routing", workload_dict(w), ctx.device)
    inp = MR.make_inputs(w, ctx.device, 0)
    ref = MR.reference(**inp)
    logits, bias, k = inp["logits"], inp["bias"], inp["top_k"]
    T, E = logits.shape
    grouped = inp["n_group"] > 1

    def as_ours(ids: torch.Tensor, weights: torch.Tensor) -> MoeRouting:
        ids = ids.to(torch.int32)  # the align triple filled in by the reference: the peer does not build it
        return MoeRouting(weights, ids, *reference_align(ids, E, inp["block_m"], None))

    def ours() -> Any:
        return MR.launch(config=cfg, **inp)

    cands = {"ours routing": Cand(ours, lambda: MR.verify(ours(), ref, inp), extra={"config_from": how})}
    if not grouped:
        ids = torch.empty(T, k, dtype=torch.int32, device=ctx.device)
        wts = torch.empty(T, k, dtype=torch.float32, device=ctx.device)
        kw = {"E": E, "EP": 1 << (E - 1).bit_length(), "K": k, "KP": max(2, 1 << (k - 1).bit_length()),
              "SQRTSOFTPLUS": inp["scoring"] == "sqrtsoftplus", "RENORM": bool(inp["renormalize"])}
        scaling = float(inp["routed_scaling_factor"])

        def ours_topk() -> Any:
            _kernels()["topk"][(T,)](logits, bias, ids, wts, scaling, **kw)
            return ids, wts

        cands["ours top-k only"] = Cand(ours_topk, lambda: MR.verify(as_ours(*ours_topk()), ref, inp))
    tk, missing = ctx.peer("tile_kernels")
    if missing:
        cands["tk top2_sum_gate"] = missing
        if not grouped:
            cands["tk topk_gate (scores given)"] = missing
    else:
        def gate() -> Any:
            return tk.moe.top2_sum_gate(logits, bias, k, inp["topk_group"], inp["n_group"], False, 0,
                                        float(inp["routed_scaling_factor"]), 0, 1, 0, 1, inp["scoring"])

        cands["tk top2_sum_gate"] = Cand(gate, lambda: MR.verify(as_ours(*gate()), ref, inp))
        if not grouped:
            from kernel_templates.moe_routing.reference import _scores
            s = (_scores(logits, inp["scoring"]) + bias).contiguous()
            rids = ref.topk_ids.long()

            def topk_only() -> Any:
                return tk.moe.topk_gate(s, k)

            def check_topk() -> None:
                got = topk_only()
                if not torch.allclose(s.gather(1, got), s.gather(1, rids), rtol=1e-6, atol=0):
                    raise AssertionError("topk_gate's experts differ from the reference beyond near-ties")

            cands["tk topk_gate (scores given)"] = Cand(topk_only, check_topk)
    align = "the peer does not build the align layout (sorted_token_ids, expert_ids, num_tokens_post_pad) grouped GEMMs read"
    pairs = [Pair("tk top2_sum_gate", "ours routing", align),
             Pair("tk top2_sum_gate", "ours top-k only", "neither builds the align layout"),
             Pair("tk topk_gate (scores given)", "ours top-k only",
                  "the peer gets the biased scores computed and returns the ids alone; ours scores, selects and weights")]
    return finish("moe_routing", shape, MR.SPEC, cands, pairs, ctx)


RUNNERS: dict[str, Callable[[dict[str, Any], Ctx], dict[str, Any]]] = {
    "sparse_mqa": run_sparse_mqa, "attention": run_attention, "mhc": run_mhc, "engram": run_engram,
    "moe_routing": run_moe_routing}
MODULES = {"sparse_mqa": ("deep_gemm",), "attention": ("flash_mla",), "mhc": ("tile_kernels", "deep_gemm"),
           "engram": ("tile_kernels",), "moe_routing": ("tile_kernels",)}
"""The peer packages each family compares with."""
