"""examples/decode_step.py: the --tiny decode step through the interpreter, every kernel call within its
family's tolerance, the whole step against its reference twin, the compiled (fullgraph) step through
torch.ops.tuner bit for bit the eager one; the CLI's refusals."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from examples import decode_step as cli
from examples.decode.dims import REAL, TINY, sized
from examples.decode.kernels import CheckingKernels, ReferenceKernels, TunerKernels
from examples.decode.model import build
from examples.decode.step import agreement, decode_step, experts, layer

FAMILIES = {"engram", "engram_hash", "mhc_pre", "mhc_post", "mhc_seam", "sparse_mqa", "nvfp4_attention",
            "moe_routing", "quantize_nvfp4"}


@pytest.fixture(scope="module")
def model():
    from conftest import DEVICE

    m = build(TINY, DEVICE, seed=0)
    yield m
    m.close()


def test_tiny_step_agrees_with_its_reference_and_compiles_whole(model):
    from tuner import runtime

    runtime.use_pack(None)
    checked = CheckingKernels()
    out = decode_step(model, checked)
    assert not checked.failures, checked.failures
    assert set(checked.calls) == FAMILIES
    assert checked.calls["nvfp4_attention"] == checked.calls["sparse_mqa"] == TINY.layers
    assert checked.calls["mhc_seam"] == TINY.layers - 1
    twin = ReferenceKernels(follow=checked.choices)
    ref = decode_step(model, twin)
    assert twin.follow == [] and twin.compared == {"sparse_mqa": TINY.layers * TINY.batch * TINY.idx_topk,
                                                   "moe_routing": TINY.layers * TINY.batch * TINY.top_k}
    assert out.shape == model.X0.shape and out.dtype == torch.bfloat16
    diff = agreement(out, ref)
    assert 0 < diff <= cli.END_TO_END_TOL * TINY.layers
    assert agreement(model.X0, ref) > 10 * diff  # the stack changed the residual far more than the kernels' error
    # each layer compiled whole (no graph break) with the kernels as torch.ops.tuner ops: the same bits,
    # and the step is repeatable (it writes the new token's cache entries before reading them)
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    assert torch.equal(decode_step(model, TunerKernels(ops=True), compiled), out)


def test_experts_are_the_weighted_sum_of_each_tokens_experts():
    g = torch.Generator().manual_seed(0)
    T, D, E, F, k = 3, 8, 5, 4, 2
    x = torch.randn(T, D, generator=g).to(torch.bfloat16)
    w13 = torch.randn(E, D, 2 * F, generator=g).to(torch.bfloat16)
    w2 = torch.randn(E, F, D, generator=g).to(torch.bfloat16)
    ids = torch.tensor([[0, 4], [4, 2], [1, 0]], dtype=torch.int32)
    wts = torch.rand(T, k, generator=g)
    want = torch.zeros(T, D)
    for t in range(T):
        for s in range(k):
            h = x[t].float() @ w13[ids[t, s]].float()
            a = torch.nn.functional.silu(h[:F]) * h[F:]
            want[t] += wts[t, s] * (a.to(torch.bfloat16).float() @ w2[ids[t, s]].float())
    torch.testing.assert_close(experts(x, ids, wts, w13, w2).float(), want, rtol=2e-2, atol=2e-2)


def test_real_dimensions_are_the_v41_flash_profile():
    from kernel_templates.moe_routing import PROFILES
    from kernel_templates.sparse_mqa import PROFILES as IDX

    assert (REAL.hidden, REAL.heads, REAL.latent, REAL.swa) == (5120, 64, 512, 128)
    assert (REAL.idx_heads, REAL.idx_topk) == (IDX["dsv41-flash"]["heads"], IDX["dsv41-flash"]["top_k"])
    assert (REAL.experts, REAL.top_k) == (PROFILES["dsv41-flash"]["num_experts"], PROFILES["dsv41-flash"]["top_k"])
    assert REAL.problems() == [] and TINY.problems() == []
    assert sized(TINY, batch=0).problems() == ["batch must be >= 1, got 0"]


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("argv, says", [
    (["--tiny", "--batch", "0"], "at least 1"),
    (["--tiny", "--context", "lots"], "not a size"),
    (["--tiny", "--layers", "-3"], "at least 1"),
    (["--tiny", "--bogus"], "unrecognized"),
    (["--tiny", "--context", "1"], "context 1 must be >= 2"),
    (["--tiny", "--pack", "/nonexistent/pack"], "no manifest.json"),
    (["--tiny", "--graph"], "--graph needs a CUDA GPU"),
    ([], "--tiny sizes only"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says, capsys):
    from conftest import HAS_GPU

    if HAS_GPU and (argv == [] or "--graph" in argv):
        pytest.skip("a GPU runs real sizes and --graph")
    with pytest.raises(SystemExit) as e:
        sys.exit(cli.main(argv))
    assert e.value.code == 2
    assert says in _one_line(capsys)


def test_no_gpu_and_no_interpreter_is_one_line(monkeypatch, capsys):
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as e:
        cli.main(["--tiny"])
    assert e.value.code == 1
    assert "TRITON_INTERPRET=1" in _one_line(capsys)


def test_help_explains_the_options(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for opt in ("--batch", "--context", "--layers", "--tiny", "--pack", "--compile", "--graph"):
        assert opt in out
