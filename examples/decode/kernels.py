"""The kernels a decode step calls, three ways: the tuned ones (``TunerKernels``: the public
functions, or ``torch.ops.tuner.*`` for a compiled step), each family's PyTorch ``reference``
(``ReferenceKernels``: the step's twin), and the tuned ones checked call by call against the
references with each family's own ``verify`` (``CheckingKernels``).

Every backend has the same methods, so ``examples.decode.step`` is written once.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from examples.decode.model import MhcParams
from kernel_templates import engram as eg
from kernel_templates import mhc, moe_routing, nvfp4_attention, sparse_mqa
from kernel_templates.engram.reference import reference_hash
from kernel_templates.moe_routing.reference import MoeRouting, _scores, reference_align
from kernel_templates.nvfp4 import quantize_nvfp4

K_FORMAT = "mxfp4"


class _Ready:
    """A lookup already done, as a handle (``wait()`` returns it)."""

    def __init__(self, out: torch.Tensor) -> None:
        self._out = out

    def wait(self) -> torch.Tensor:
        return self._out


def _hash_args(p: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    return p["comp"], p["multipliers"], p["primes"], p["offsets"]


class TunerKernels:
    """The tuned kernels, configs from the active pack (or the defaults): the plain public
    functions, or with ``ops`` the ``torch.ops.tuner`` custom ops (what a compiled step calls).
    Engram lookups run on the prefetcher's side stream (``EngramPrefetcher``), one a layer ahead."""

    def __init__(self, ops: bool = False) -> None:
        self.ops = ops
        self.name = "tuner ops" if ops else "tuner"
        self._prefetchers: dict[int, eg.EngramPrefetcher] = {}
        if ops:
            import kernel_templates.ops  # noqa: F401  (registers torch.ops.tuner.*)

    def engram_hash(self, tokens: torch.Tensor, p: dict[str, Any]) -> torch.Tensor:
        if self.ops:
            return torch.ops.tuner.engram_hash(tokens, *_hash_args(p), pad_id=p["pad_id"])
        return eg.engram_hash(tokens, *_hash_args(p), pad_id=p["pad_id"])

    def engram_submit(self, table: eg.EngramTable, rows: torch.Tensor) -> Any:
        pf = self._prefetchers.get(id(table))
        if pf is None:
            pf = self._prefetchers[id(table)] = eg.EngramPrefetcher(table)
        return pf.submit(rows)

    def quantize_nvfp4(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.ops.tuner.quantize_nvfp4(x) if self.ops else quantize_nvfp4(x)

    def mhc_pre(self, X: torch.Tensor, p: MhcParams):
        return (torch.ops.tuner.mhc_pre if self.ops else mhc.mhc_pre)(X, *p.args())

    def mhc_post(self, X, y, post, comb) -> torch.Tensor:
        return (torch.ops.tuner.mhc_post if self.ops else mhc.mhc_post)(X, y, post, comb)

    def mhc_seam(self, X, y, post, comb, p: MhcParams):
        return (torch.ops.tuner.mhc_seam if self.ops else mhc.mhc_seam)(X, y, post, comb, *p.args())

    def mqa_topk(self, q, weights, k_cache, k_scales, block_table, seq_lens, top_k: int) -> torch.Tensor:
        f = torch.ops.tuner.mqa_topk if self.ops else sparse_mqa.mqa_topk
        return f(q, weights, k_cache, k_scales, block_table, seq_lens, top_k=top_k, k_format=K_FORMAT)

    def attention(self, q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx):
        if self.ops:
            return torch.ops.tuner.nvfp4_decode_attention(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv,
                                                          swa_scales, sink, topk_idx=topk_idx, kv_dtype="nvfp4")
        return nvfp4_attention.nvfp4_decode_attention(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv,
                                                      swa_scales, sink, topk_idx=topk_idx, kv_dtype="nvfp4")

    def moe_routing(self, logits, bias, routing: dict[str, Any]) -> MoeRouting:
        if self.ops:
            return MoeRouting(*torch.ops.tuner.moe_routing(logits, bias, **routing))
        return moe_routing.moe_routing(logits, bias, **routing)


class ReferenceKernels:
    """Each family's PyTorch ``reference`` (fp32 / fp64), with outputs stored as the step stores
    them (bf16 activations and residual): the step's twin.

    ``follow``: the discrete choices of a tuned step (``CheckingKernels.choices``: each indexer
    top-k, each token's experts, in call order). A choice the kernels' rounding flips (a key at the
    top-k boundary, an expert a hair behind another) would make the two steps diverge by a whole
    expert; where the twin's own choice differs, it takes the tuned one and counts the difference
    (``differed``: keys or (token, slot) picks, ``compared``: of how many), so what the final
    residuals compare is the continuous arithmetic. The expert weights stay the twin's own, from
    its logits."""

    name = "reference"
    ops = False

    def __init__(self, follow: list[torch.Tensor] | None = None) -> None:
        self.follow = list(follow) if follow is not None else None
        self.differed: dict[str, int] = {"sparse_mqa": 0, "moe_routing": 0}
        self.compared: dict[str, int] = {"sparse_mqa": 0, "moe_routing": 0}

    def _take(self, family: str, own: torch.Tensor) -> torch.Tensor:
        """The tuned step's choice where it is followed (counting the rows' elements not in the twin's own)."""
        if self.follow is None:
            return own
        theirs = self.follow.pop(0).to(own.device)
        if theirs.shape != own.shape:
            raise ValueError(f"{family}: the followed choice has shape {list(theirs.shape)}, the twin's "
                             f"{list(own.shape)}: another step's choices")
        a, b = theirs.reshape(-1, own.shape[-1]), own.reshape(-1, own.shape[-1])
        inside = (a[:, :, None] == b[:, None, :]).any(-1) | (a < 0)
        self.differed[family] += int((~inside).sum())
        self.compared[family] += int((a >= 0).sum())
        return theirs

    def engram_hash(self, tokens, p):
        return reference_hash(tokens, *_hash_args(p), pad_id=p["pad_id"])

    def engram_submit(self, table, rows):
        return _Ready(eg.reference(table, rows).to(torch.bfloat16))

    def quantize_nvfp4(self, x):
        return quantize_nvfp4(x)  # the format's definition

    def mhc_pre(self, X, p: MhcParams):
        u, post, comb = mhc.reference(op="pre", X=X, fn=p.fn, scale=p.scale, base=p.base, norm_w=p.norm_w)
        return u.to(torch.bfloat16), post, comb

    def mhc_post(self, X, y, post, comb):
        return mhc.reference(op="post", X=X, y=y, post=post, comb=comb).to(torch.bfloat16)

    def mhc_seam(self, X, y, post, comb, p: MhcParams):
        Xn, u, post_n, comb_n = mhc.reference(op="seam", X=X, y=y, post=post, comb=comb, fn=p.fn, scale=p.scale,
                                              base=p.base, norm_w=p.norm_w)
        return Xn.to(torch.bfloat16), u.to(torch.bfloat16), post_n, comb_n

    def mqa_topk(self, q, weights, k_cache, k_scales, block_table, seq_lens, top_k):
        return self._take("sparse_mqa", sparse_mqa.reference(q, weights, k_cache, k_scales, block_table, seq_lens,
                                                             top_k=top_k, k_format=K_FORMAT))

    def attention(self, q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx):
        return nvfp4_attention.reference(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink,
                                         topk_idx=topk_idx, kv_dtype="nvfp4").to(torch.bfloat16)

    def moe_routing(self, logits, bias, routing):
        own = moe_routing.reference(logits, bias, **routing)
        ids = self._take("moe_routing", own.topk_ids)
        if ids is own.topk_ids:
            return own
        w = _scores(logits, routing["scoring"]).gather(1, ids.long())  # the weights are of the unbiased scores
        if routing["renormalize"]:
            w = w / w.sum(-1, keepdim=True)
        return MoeRouting(w * routing["routed_scaling_factor"], ids, *reference_align(ids, logits.shape[1], 64))


class _CheckedLookup:
    """A prefetched lookup whose ``wait()`` judges the rows it returns against the reference lookup."""

    def __init__(self, handle: Any, table: eg.EngramTable, rows: torch.Tensor, judge: Callable) -> None:
        self.handle, self.table, self.rows, self.judge = handle, table, rows, judge

    def wait(self) -> torch.Tensor:
        out = self.handle.wait()
        self.judge("engram", lambda: eg.SPEC.verify(out, eg.reference(self.table, self.rows), {}))
        return out


class CheckingKernels(TunerKernels):
    """The tuned kernels (plain functions, eager), each call judged against its family's
    ``reference`` on the same inputs by the family's ``verify`` (its tolerance); the Engram hash
    and the NVFP4 quantizer must match exactly. ``failures`` lists what failed, ``calls`` counts
    the calls judged per family, ``layer`` labels them; ``choices`` keeps the discrete outputs
    (indexer top-k, experts) for a ``ReferenceKernels`` twin to follow."""

    def __init__(self) -> None:
        super().__init__(ops=False)
        self.name = "tuner (checked)"
        self.ref = ReferenceKernels()
        self.failures: list[str] = []
        self.calls: dict[str, int] = {}
        self.choices: list[torch.Tensor] = []
        self.layer = 0

    def _judge(self, family: str, check: Callable[[], None]) -> None:
        self.calls[family] = self.calls.get(family, 0) + 1
        try:
            check()
        except AssertionError as e:
            self.failures.append(f"layer {self.layer} {family}: {str(e).splitlines()[0][:300]}")

    def engram_hash(self, tokens, p):
        out = super().engram_hash(tokens, p)
        ref = self.ref.engram_hash(tokens, p)

        def check() -> None:
            if not torch.equal(out.cpu(), ref.cpu()):
                raise AssertionError("rows differ from reference_hash")
        self._judge("engram_hash", check)
        return out

    def engram_submit(self, table, rows):
        return _CheckedLookup(super().engram_submit(table, rows), table, rows, self._judge)

    def quantize_nvfp4(self, x):
        out = super().quantize_nvfp4(x)

        def check() -> None:
            c, s = quantize_nvfp4(x)
            if not (torch.equal(out[0], c) and torch.equal(out[1], s)):
                raise AssertionError("codes or scales differ from quantize_nvfp4")
        self._judge("quantize_nvfp4", check)
        return out

    def _mhc(self, op: str, out: Any, **inputs: Any) -> Any:
        inputs = dict(op=op, eps=1e-6, sinkhorn_iters=20, **inputs)
        self._judge(f"mhc_{op}", lambda: mhc.SPEC.verify(out, mhc.reference(**inputs), inputs))
        return out

    def mhc_pre(self, X, p):
        return self._mhc("pre", super().mhc_pre(X, p), X=X, fn=p.fn, scale=p.scale, base=p.base, norm_w=p.norm_w)

    def mhc_post(self, X, y, post, comb):
        return self._mhc("post", super().mhc_post(X, y, post, comb), X=X, y=y, post=post, comb=comb)

    def mhc_seam(self, X, y, post, comb, p):
        return self._mhc("seam", super().mhc_seam(X, y, post, comb, p), X=X, y=y, post=post, comb=comb, fn=p.fn,
                         scale=p.scale, base=p.base, norm_w=p.norm_w)

    def mqa_topk(self, q, weights, k_cache, k_scales, block_table, seq_lens, top_k):
        out = super().mqa_topk(q, weights, k_cache, k_scales, block_table, seq_lens, top_k)
        inputs = {"q": q, "weights": weights, "k_cache": k_cache, "k_scales": k_scales, "block_table": block_table,
                      "seq_lens": seq_lens, "top_k": top_k, "k_format": K_FORMAT, "return_logits": False}
        self._judge("sparse_mqa", lambda: sparse_mqa.SPEC.verify(out, sparse_mqa.reference(**inputs), inputs))
        self.choices.append(out)
        return out

    def attention(self, q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx):
        out = super().attention(q, kv_codes, kv_scales, block_table, seq_lens, swa_kv, swa_scales, sink, topk_idx)
        inputs = {"q": q, "kv_codes": kv_codes, "kv_scales": kv_scales, "block_table": block_table,
                  "seq_lens": seq_lens,
                      "swa_kv": swa_kv, "swa_scales": swa_scales, "sink": sink, "sm_scale": None, "topk_idx": topk_idx,
                      "kv_dtype": "nvfp4"}
        self._judge("nvfp4_attention",
                    lambda: nvfp4_attention.SPEC.verify(out, nvfp4_attention.reference(**inputs), inputs))
        return out

    def moe_routing(self, logits, bias, routing):
        out = super().moe_routing(logits, bias, routing)
        inputs = dict(logits=logits, bias=bias, block_m=64, expert_map=None, **routing)
        self._judge("moe_routing", lambda: moe_routing.SPEC.verify(out, moe_routing.reference(**inputs), inputs))
        self.choices.append(out.topk_ids)
        return out
