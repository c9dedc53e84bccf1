"""mHC in plain PyTorch: the float64 reference (the specification) and the eager baseline."""
from __future__ import annotations

import torch


def coeffs_from_mix(mix: torch.Tensor, scale: torch.Tensor, base: torch.Tensor, eps: float,
                    sinkhorn_iters: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """pre [T, 4], post [T, 4], comb [T, 4, 4] (float64) from the RMS-scaled mix sums [T, 24]."""
    s, b = scale.double(), base.double()
    pre = torch.sigmoid(mix[:, 0:4] * s[0] + b[0:4]) + eps
    post = 2 * torch.sigmoid(mix[:, 4:8] * s[1] + b[4:8])
    comb = torch.softmax((mix[:, 8:24] * s[2] + b[8:24]).view(-1, 4, 4), dim=-1) + eps
    comb = comb / (comb.sum(-2, keepdim=True) + eps)
    for _ in range(sinkhorn_iters - 1):
        comb = comb / (comb.sum(-1, keepdim=True) + eps)
        comb = comb / (comb.sum(-2, keepdim=True) + eps)
    return pre, post, comb


def _ref_pre(X, fn, scale, base, norm_w, eps, sinkhorn_iters):
    Xd = X.double()
    x = Xd.flatten(1)
    mix = (x @ fn.double().t()) * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    pre, post, comb = coeffs_from_mix(mix, scale, base, eps, sinkhorn_iters)
    h = (pre[:, :, None] * Xd).sum(1)
    u = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * norm_w.double()
    return u.float(), post.float(), comb.float()


def _ref_post(X, y, post, comb):
    # X'_j = post_j * y + sum_i comb[i, j] * X_i
    Xn = post.double()[:, :, None] * y.double()[:, None, :] + torch.einsum("tij,tid->tjd", comb.double(), X.double())
    return Xn.float()


def reference(*, op: str, X, fn=None, scale=None, base=None, norm_w=None, y=None, post=None, comb=None,
              eps: float = 1e-6, sinkhorn_iters: int = 20):
    """The specification in float64, outputs as float32.

    pre -> (u, post, comb); post -> X_new; seam -> (X_new, u, post_next, comb_next). The
    seam's pre reads X_new rounded to bf16: the residual is stored in bf16.
    """
    if op == "pre":
        return _ref_pre(X, fn, scale, base, norm_w, eps, sinkhorn_iters)
    Xn = _ref_post(X, y, post, comb)
    if op == "post":
        return Xn
    return (Xn, *_ref_pre(Xn.to(torch.bfloat16), fn, scale, base, norm_w, eps, sinkhorn_iters))


def _eager_pre(X, fn, scale, base, norm_w, eps, sinkhorn_iters):
    x = X.flatten(1).float()
    mix = (x @ fn.t()) * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    pre = torch.sigmoid(mix[:, 0:4] * scale[0] + base[0:4]) + eps
    post = 2 * torch.sigmoid(mix[:, 4:8] * scale[1] + base[4:8])
    comb = torch.softmax((mix[:, 8:24] * scale[2] + base[8:24]).view(-1, 4, 4), dim=-1) + eps
    comb = comb / (comb.sum(-2, keepdim=True) + eps)
    for _ in range(sinkhorn_iters - 1):
        comb = comb / (comb.sum(-1, keepdim=True) + eps)
        comb = comb / (comb.sum(-2, keepdim=True) + eps)
    h = (pre.unsqueeze(-1) * X.float()).sum(1)
    u = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * norm_w.float()
    return u.to(torch.bfloat16), post, comb


def _eager_post(X, y, post, comb):
    Xn = post.unsqueeze(-1) * y.float().unsqueeze(1) + torch.einsum("tij,tid->tjd", comb, X.float())
    return Xn.to(torch.bfloat16)


def torch_eager(*, op: str, X, fn=None, scale=None, base=None, norm_w=None, y=None, post=None, comb=None,
                eps: float = 1e-6, sinkhorn_iters: int = 20):
    """The same math as a user would write it in PyTorch (fp32 math, bf16 storage); no
    host syncs, so it can be captured in a CUDA graph."""
    if op == "pre":
        return _eager_pre(X, fn, scale, base, norm_w, eps, sinkhorn_iters)
    Xn = _eager_post(X, y, post, comb)
    if op == "post":
        return Xn
    return (Xn, *_eager_pre(Xn, fn, scale, base, norm_w, eps, sinkhorn_iters))
