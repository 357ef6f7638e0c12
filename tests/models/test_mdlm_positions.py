"""Positions of the masked-diffusion baseline (models/mdlm.py): ``model.positional: rotary`` on the GPT-2
conventions (the reference DiT's rotary on every head dimension) replaces the learned ``wpe`` table; the
default (learned) forward is the hand computation wte + wpe -> bidirectional blocks -> ln_f."""
from __future__ import annotations

import torch

from models.registry import build_model

V, L = 23, 12


def tiny(**extra):
    torch.manual_seed(0)
    return build_model({"arch": "mdlm_gpt2", "d_model": 32, "n_layer": 2, "n_head": 4, **extra}, vocab_size=V,
                       seq_len=L)


def permuted_hidden(model, x: torch.Tensor, perm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden(x) reordered by ``perm`` and hidden(x reordered by perm): equal iff the network ignores order.
    The matrices are scaled x 4 first so that attention is far from uniform (as after training)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(4)
        return model.hidden(x)[:, perm], model.hidden(x[:, perm])


def test_rotary_gpt2_has_no_position_table_and_rotates_every_head_dimension():
    model = tiny(positional="rotary")
    assert model.wpe is None and not any(name.startswith("wpe") for name in model.state_dict())
    rotary = model.blocks[0].attn.rotary
    assert rotary is not None and all(block.attn.rotary is rotary for block in model.blocks)
    assert rotary.rot_dim == 32 // 4  # rotary_pct 1.0 (the DiT's rotary on the whole head)
    learned = tiny()
    assert learned.num_params() == model.num_params()  # wpe is an embedding: the non-embedding count is the same
    assert learned.num_params(non_embedding=False) - model.num_params(non_embedding=False) == L * 32


def test_without_positions_the_bidirectional_network_ignores_order_and_rotary_does_not():
    x = torch.randint(0, V, (2, L), generator=torch.Generator().manual_seed(1))
    x[:, ::3] = V  # some [MASK] inputs, as the network sees them
    perm = torch.randperm(L, generator=torch.Generator().manual_seed(2))
    blind = tiny().eval()
    with torch.no_grad():
        blind.wpe.weight.zero_()  # the control: no positional signal at all
    a, b = permuted_hidden(blind, x, perm)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)  # permutation-equivariant: the test can tell
    a, b = permuted_hidden(tiny(positional="rotary").eval(), x, perm)
    assert (a - b).abs().max() > 0.05  # 0.17 here, the control 1e-6


def test_default_forward_is_learned_positions_bit_for_bit():
    model = tiny().eval()
    assert model.cfg.positional == "learned" and model.wpe is not None
    xt = torch.randint(0, V + 1, (2, L), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        h = model.wte(xt) + model.wpe.weight[:L]
        for block in model.blocks:
            assert block.attn.rotary is None
            h = block(h, causal=False)
        assert torch.equal(model.hidden(xt), model.ln_f(h))


def test_rotary_model_trains_and_samples():
    model = tiny(positional="rotary").train()
    x0 = torch.randint(0, V, (4, L), generator=torch.Generator().manual_seed(4))
    torch.manual_seed(5)
    loss = model(x0, x0)["losses"]["nelbo"]
    assert torch.isfinite(loss) and loss > 0
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    out = model.sample(3, 8, generator=torch.Generator().manual_seed(6))
    assert out.ids.shape == (3, L) and int(out.ids.max()) < V and 1 <= out.nfe <= 9
    source = x0[:3, :4]
    cond = model.sample(3, 8, generator=torch.Generator().manual_seed(6), source=source)
    assert torch.equal(cond.ids[:, :4], source) and int(cond.ids.max()) < V
