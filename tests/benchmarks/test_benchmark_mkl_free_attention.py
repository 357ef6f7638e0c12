"""The MKL-free attention benchmark at a toy size: both arms timed, the ratio from the medians, and the
oneDNN attention equal to ATen's flash kernel in output and in every input gradient."""
from __future__ import annotations

import json

import torch

from benchmarks import mkl_free_attention


def test_both_arms_timed_and_the_onednn_attention_is_the_flash_kernels(tmp_path):
    out = tmp_path / "mkl_free_attention.json"
    returned = mkl_free_attention.main(["--batch", "2", "--heads", "2", "--seq", "12", "--head-dim", "4",
                                        "--rounds", "4", "--warmup", "1", "--out", str(out)])
    r = json.loads(out.read_text())
    assert r == json.loads(json.dumps(returned))
    ms = {name: arm["median_ms"] for name, arm in r["arms"].items()}
    assert set(ms) == {"flash", "onednn"} and all(v > 0 for v in ms.values())
    assert r["ratio_onednn_over_flash"] == ms["onednn"] / ms["flash"]
    assert set(r["agreement_max_abs"]) == {"output", "grad_q", "grad_k", "grad_v"}
    assert max(r["agreement_max_abs"].values()) < 1e-5 and r["environment"]["threads"] == 1


def test_self_attention_one_tensor_for_q_k_and_v_is_the_flash_kernels():
    x = torch.randn(2, 3, 9, 5, requires_grad=True)
    grad = torch.randn(2, 3, 9, 5)
    outs = [attend(x, x, x) for attend in mkl_free_attention.ARMS.values()]
    grads = [torch.autograd.grad(out, x, grad)[0] for out in outs]
    assert torch.allclose(*outs, atol=1e-5) and torch.allclose(*grads, atol=1e-5)


def test_a_future_token_does_not_reach_the_past():
    q, k, v = (torch.randn(1, 1, 6, 4) for _ in range(3))
    changed = v.clone()
    changed[..., -1, :] += 1.0  # only the last position's value moves
    before, after = (mkl_free_attention.OneDNNAttention.apply(q, k, x) for x in (v, changed))
    assert torch.equal(before[..., :-1, :], after[..., :-1, :]) and not torch.equal(before, after)
