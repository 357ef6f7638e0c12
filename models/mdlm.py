"""Masked diffusion language model (MDLM; Sahoo et al. 2024): the masked-diffusion baseline of NCM
(arXiv 2610.14162, Table 8 and Fig. 5: MDLM / DUO-style samplers at a given NFE).

The backbone's blocks (GPT-2, Pythia or Llama conventions, ``models.token_lm``) run bidirectionally
(``causal=False``) over a sequence in which some tokens are replaced by an absorbing [MASK] token;
the network predicts the clean tokens. Sources are the two public codebases as summarised in
docs/sources.md, "MDLM / DUO" (file:line of the snapshots named there: mdlm = kuleshov-group/mdlm @
c112c526, duo = s-sahoo/duo @ 7c9b498f):

* **absorbing state**: [MASK] is an extra id, ``mask_id = vocab_size`` (our BPE has no mask token);
  the embedding has V + 1 rows and the head V + 1 outputs (duo trainer_base.py:857-870; mdlm
  diffusion.py:85-90). Forward process: each token independently masked with probability 1 - alpha_t
  (duo ``q_xt``, trainer_base.py:886-899).
* **log-linear schedule**: alpha_t = 1 - (1 - eps) t, alpha'_t = -(1 - eps), ``noise_eps`` 1e-3
  (duo ``LogLinear``, trainer_base.py:25-38; mdlm ``LogLinearNoise``, noise_schedule.py:126-151,
  whose move chance 1 - e^-sigma(t) is the same (1 - eps) t).
* **SUBS parameterisation** (mdlm ``_subs_parameterization``, diffusion.py:261-277; duo
  ``MDLM._process_model_output``, algo.py:87-102): the [MASK] logit is -inf (the sources add -1e6)
  and the rest renormalised, so [MASK] is never predicted; a position whose input is not [MASK]
  copies it: log-probability 0 on the input token, -inf elsewhere. The loss therefore reads only
  the masked positions; it computes their cross-entropy over the V real tokens' logits, which is
  exactly the SUBS log-probability (the -inf logit adds nothing to the normaliser).
* **no time conditioning** (``time_conditioning: False``, both codebases): the network sees x_t only.
  The sources' DiT then feeds sigma = 0 to its adaLN, a constant learned modulation; our pre-norm
  blocks have none (ours: the backbone's own blocks, so the baseline matches the AR model's size and
  conventions -- width, init, dropout -- rather than the DiT's).
* **positions**: the backbone's ``model.positional``. The sources' DiT (``model=small``; mdlm
  models/dit.py, ``DIT.__init__`` / ``Rotary`` / ``DDiTBlock.forward``) has no position table: one
  ``Rotary(hidden_size // n_heads)``, base 10000, "rotate half" pairing, applied to q and k (v left
  as is) in every block, on every head dimension. ``positional: rotary`` (``rotary_pct`` 1.0,
  ``rotary_base`` 10000) gives the same on the GPT-2 conventions: no ``wpe``, q and k rotated in each
  block (``models.blocks.Rotary``, the same convention). Pythia and Llama
  are rotary already (25 % and 100 % of the head). The GPT-2 default stays ``learned`` (``wpe``, as
  the AR model); the profiles' MDLM experiments set rotary, because a bidirectional network over a
  sequence that is mostly [MASK] gets its order only from the positions, and a learned table starting
  at N(0, 0.02) learns that slowly (the profile comments give the measurement).
* **loss** (duo ``MDLM.nll_per_token``, algo.py:104-111; mdlm ``_forward_pass_diffusion``):
  -log p_theta(x0 | x_t) * (-alpha'_t / (1 - alpha_t)) = -log p / t on masked positions, 0 elsewhere
  (SUBS); the sequence loss is the token-masked mean: the sum over every position divided by the
  number of (non-padding) positions, all of them here (mdlm ``_loss``, :896-916; duo ``_loss``).
  Named ``nelbo``: it is the continuous-time NELBO per token in nats, an upper bound on the NLL.
* **time sampling**: t ~ U[``sampling_eps``, 1], sampling_eps 1e-3, antithetic (stratified over the
  batch: u_i = (u / n + i / n) mod 1) (mdlm ``_sample_t``, diffusion.py:800-808; configs
  ``training.antithetic_sampling: True``, ``sampling_eps: 1e-3``). Stratified per micro-batch (mdlm;
  duo stratifies over the global batch and hands each accumulation step its slice).
* **randomness**: training draws t and the masks from torch's global RNG, which the trainer seeds
  and checkpoints (a resumed run draws the same masks). In eval mode (the trainer's validation) they
  come from a private generator seeded ``VALID_SEED`` (ours): the validation loss of a batch is then
  the same at every evaluation, and validation does not move the training RNG.

Sampler (``sample``): ancestral sampling with caching, the sources' ``ddpm_cache`` / ``ancestral_cache``
(mdlm ``_ddpm_caching_update`` + ``_sample``, diffusion.py:592-610, :658-698; duo
``generate_samples``, trainer_base.py:743-798). From all-[MASK], over the grid t_i = linspace(1,
``SAMPLE_EPS`` = 1e-5, steps + 1): for each step t -> s, a masked position becomes token v with
probability p_theta(v) (alpha_s - alpha_t) / (1 - alpha_t) and stays masked with probability
(1 - alpha_s) / (1 - alpha_t) (duo ``_posterior_from_x0``); unmasked positions are carried over.
Without time conditioning p_theta depends on x_t alone, so when a step changes no token the next step
reuses it (the cache): NFE <= steps. The posterior and the Gumbel noise are float64 (duo
``sampling.use_float64: True``, trainer_base.py:591-592, 908; mdlm main samples in float32, a known
cause of too-low Gen PPL and entropy, docs/sources.md, "MDLM / DUO", item 7). The draw from q is
factorised exactly (ours, for speed; the sources draw argmax q / E over all V + 1 entries of every
position): stay masked with probability (1 - alpha_s) / (1 - alpha_t) (a float64 uniform), else draw a
token from p_theta as argmax p / E, E = 1e-10 - log(U + 1e-10) (duo ``sample_categorical``, an
exponential race); p_theta is computed for the masked positions only. ``noise_removal`` after the last
step (duo ``sampling.noise_removal``, default ``ancestral``, configs/config.yaml): ``ancestral`` draws
every still-masked position from p_theta (alpha_s = 1), ``greedy`` takes its argmax (the greedy-tail
sampler: lower Gen PPL and entropy), ``none`` leaves it masked. Both reuse a valid cache, and are
skipped when nothing is masked any more (the output would not change; duo always calls the network for
``greedy``): ``nfe`` counts the calls actually made, <= steps + 1.

Not reproduced (recorded here, not switches): the rest of the sources' DiT backbone (adaLN, dropout 0.1 in
``model=small``; ours are the backbone's blocks, above; rotary is ``model.positional``), the EMA of the
weights (0.9999, both codebases; the suite's trainer keeps none) and their optimiser recipe (AdamW 3e-4,
no weight decay, constant LR after warm-up, docs/sources.md, "MDLM / DUO", item 5: the profile's ``train``
settings decide). Semi-autoregressive sampling, the ``analytic`` predictor and nucleus sampling (duo
``p_nucleus``, default 1.0) are left out.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import torch
from torch import nn

from models.blocks import init_weights, make_norm
from models.losses import weighted_linear_cross_entropy
from models.token_lm import (Generation, count_params, make_block, make_rotary, residual_init_depth,
                             token_lm_flops_per_token)

SAMPLE_EPS = 1e-5   # last time of the sampling grid (mdlm ``_sample(eps=1e-5)``; duo ``generate_samples``)
VALID_SEED = 0      # masks and times of the eval-mode loss (ours)
NOISE_REMOVAL = ("ancestral", "greedy", "none")


class MDLM(nn.Module):
    """Bidirectional backbone over x_t with [MASK] = ``vocab_size``; SUBS log-probabilities of x0."""

    CAUSAL_LM: ClassVar[bool] = False  # not a causal LM: the lm-eval adapter refuses it

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.mask_id = cfg.vocab_size
        d = cfg.d_model
        rotary = make_rotary(cfg)
        self.wte = nn.Embedding(cfg.vocab_size + 1, d)
        self.wpe = nn.Embedding(cfg.seq_len, d) if cfg.positional == "learned" else None
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(make_block(cfg, rotary) for _ in range(cfg.n_layer))
        self.ln_f = make_norm(cfg.norm, d, cfg.norm_eps, cfg.bias)
        self.lm_head = nn.Linear(d, cfg.vocab_size + 1, bias=False)  # row mask_id: its logit is always -inf
        init_weights(self, cfg.init_std, residual_init_depth(cfg))
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight

    # --- schedule ------------------------------------------------------------------------------
    def mask_prob(self, t: torch.Tensor | float) -> torch.Tensor | float:
        """1 - alpha_t = (1 - eps) t, the probability that a token is masked at time t (no cancellation)."""
        return (1 - self.cfg.noise_eps) * t

    def alpha(self, t: torch.Tensor | float) -> torch.Tensor | float:
        """alpha_t = 1 - (1 - eps) t, the probability that a token is still unmasked at time t."""
        return 1 - self.mask_prob(t)

    def loss_weight(self, t: torch.Tensor) -> torch.Tensor:
        """-alpha'_t / (1 - alpha_t) with alpha'_t = -(1 - eps): 1 / t for the log-linear schedule."""
        return (1 - self.cfg.noise_eps) / self.mask_prob(t)

    def sample_t(self, n: int, generator: torch.Generator | None = None, device=None) -> torch.Tensor:
        """n training times in [sampling_eps, 1], stratified when ``antithetic``."""
        u = torch.rand(n, generator=generator, device=device)
        if self.cfg.antithetic:
            u = (u / n + torch.arange(n, device=device) / n) % 1
        return (1 - self.cfg.sampling_eps) * u + self.cfg.sampling_eps

    # --- network -------------------------------------------------------------------------------
    def hidden(self, xt: torch.Tensor) -> torch.Tensor:
        """Final normalised hidden states (B, L, d) of x_t, every position seeing every other."""
        if xt.shape[1] > self.cfg.seq_len:
            raise ValueError(f"input length {xt.shape[1]} exceeds model.seq_len={self.cfg.seq_len}")
        x = self.wte(xt)
        if self.wpe is not None:
            x = x + self.wpe.weight[:xt.shape[1]]
        x = self.drop(x)
        for block in self.blocks:
            x = block(x, causal=False)
        return self.ln_f(x)

    def subs(self, logits: torch.Tensor, xt: torch.Tensor) -> torch.Tensor:
        """SUBS log-probabilities (B, L, V + 1) from raw logits: [MASK] at -inf, renormalised;
        unmasked positions copy their input (0 on it, -inf elsewhere)."""
        logits = logits.clone()
        logits[..., self.mask_id] = float("-inf")
        log_p = logits.log_softmax(-1)
        copied = torch.full_like(log_p, float("-inf")).scatter_(-1, xt.unsqueeze(-1), 0.0)
        return torch.where((xt != self.mask_id).unsqueeze(-1), copied, log_p)

    def log_probs(self, xt: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """log p_theta(x0 | x_t), SUBS, computed in ``dtype`` from the network's logits."""
        return self.subs(self.lm_head(self.hidden(xt)).to(dtype), xt)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> dict:
        """Without targets: ``{"logits": log p_theta(x0 | x_t = idx)}`` (B, L, V + 1), SUBS (idx may
        hold ``mask_id``). With targets (the trainer's next-token targets, unused: the clean sequence
        is idx itself): ``{"losses": {"nelbo"}, "metrics": {"mask_frac", "masked_ce"}}`` for one draw of
        t and of the masks (module docstring)."""
        if targets is None:
            return {"logits": self.log_probs(idx)}
        x0 = idx
        if int(x0.max()) >= self.mask_id:
            raise ValueError(f"input ids reach {int(x0.max())} >= model.vocab_size={self.mask_id} (the [MASK] id); "
                             "the clean sequence must hold data tokens only")
        b, n = x0.shape
        generator = None
        if not self.training:
            generator = torch.Generator(device=x0.device).manual_seed(VALID_SEED)
        t = self.sample_t(b, generator, x0.device)
        masked = torch.rand(b, n, generator=generator, device=x0.device) < self.mask_prob(t)[:, None]
        masked[:, :self.cfg.prefix_len] = False  # the source is the condition, never noised
        h = self.hidden(x0.masked_fill(masked, self.mask_id))
        weight = self.loss_weight(t)
        real = self.lm_head.weight[:self.mask_id]  # the [MASK] logit is -inf: it leaves the normaliser
        count = int(masked.sum())
        noised = b * (n - self.cfg.prefix_len)  # the target positions: the NELBO per target token
        # every masked token of row i weighs weight_i / noised: the NELBO per target token, in one pass
        row_weights = weight[:, None].expand(b, n)[masked] / noised  # fp32: the kernel casts once
        if count:
            total, nll, _ = weighted_linear_cross_entropy(h[masked], real, x0[masked], row_weights)
        else:  # a batch without a masked token still has a graph
            total, nll = h.sum() * 0.0, h.new_zeros(0)
        return {"losses": {"nelbo": total},
                "metrics": {"mask_frac": count / noised, "masked_ce": float(nll.sum()) / max(count, 1)}}

    # --- sampling ------------------------------------------------------------------------------
    @staticmethod
    def categorical(p: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """One draw per row of the float64 weights p: argmax p / E, E ~ Exp(1) as 1e-10 - log(U + 1e-10)
        (duo ``sample_categorical``, an exponential race: the Gumbel-max trick in the probability domain)."""
        u = torch.rand(p.shape, dtype=torch.float64, generator=generator, device=p.device)
        return (p / (1e-10 - (u + 1e-10).log())).argmax(-1)

    def predict(self, xt: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """p_theta(x0 | x_t) (k, V) in float64 for the k ``masked`` positions of x_t, over the V data
        tokens: SUBS's [MASK] at -inf and renormalised (its other half, copying, is the caller's)."""
        logits = self.hidden(xt)[masked] @ self.lm_head.weight[:self.mask_id].T
        return logits.double().softmax(-1)

    @torch.no_grad()
    def sample(self, n: int, steps: int, *, length: int | None = None, generator: torch.Generator | None = None,
               noise_removal: str = "ancestral", cache: bool = True, source: torch.Tensor | None = None) -> Generation:
        """``n`` sequences of ``length`` (default ``seq_len``) tokens in ``steps`` ancestral steps from
        all-[MASK] (module docstring). ``cache=False`` calls the network at every step (NFE = steps).
        ``source`` (n, P): the first P positions are given (a conditional model's prefix, ``prefix_len``)
        and never masked; the rest is sampled; the ids returned include the source.
        Returns ``Generation(ids (n, length), nfe)``, nfe = network calls made. Run in eval mode;
        ``generator`` (on the model's device) makes it deterministic.

        One step t -> s draws each masked position from q = [p_theta(v) (m_t - m_s) / m_t for each
        token v; m_s / m_t for [MASK]] (m = 1 - alpha). Since p_theta sums to 1, q factorises exactly:
        the position stays masked with probability m_s / m_t (a float64 uniform draw), and otherwise
        takes a token drawn from p_theta (float64 exponential race). Only the masked positions' p_theta
        is computed and kept (unmasked positions are copied, SUBS), and only the unmasking positions
        draw token noise; the cached p_theta is reused while no position changes."""
        if steps < 1:
            raise ValueError(f"steps={steps}: the sampler needs at least 1 step")
        if noise_removal not in NOISE_REMOVAL:
            raise ValueError(f"noise_removal={noise_removal!r}: use one of {list(NOISE_REMOVAL)}")
        length = length or self.cfg.seq_len
        device = self.wte.weight.device
        x = torch.full((n, length), self.mask_id, dtype=torch.long, device=device)
        if source is not None:
            x[:, :source.shape[1]] = source.to(device)
        grid = torch.linspace(1, SAMPLE_EPS, steps + 1, dtype=torch.float64).tolist()
        p_x0, nfe = None, 0  # p_theta of the positions masked in x, row-aligned with x[x == mask_id]
        for t, s in zip(grid[:-1], grid[1:]):
            masked = x == self.mask_id
            if p_x0 is None:
                p_x0, nfe = self.predict(x, masked), nfe + 1
            stay = self.mask_prob(s) / self.mask_prob(t)  # (1 - alpha_s) / (1 - alpha_t)
            unmask = torch.rand(len(p_x0), dtype=torch.float64, generator=generator, device=device) >= stay
            if not bool(unmask.any()):  # x unchanged: p_theta(x0 | x) is still valid (no time conditioning)
                p_x0 = p_x0 if cache else None
                continue
            values = torch.full((len(p_x0),), self.mask_id, dtype=torch.long, device=device)
            values[unmask] = self.categorical(p_x0[unmask], generator)
            x, p_x0 = x.masked_scatter(masked, values), None
        masked = x == self.mask_id
        if noise_removal != "none" and bool(masked.any()):
            if p_x0 is None:
                p_x0, nfe = self.predict(x, masked), nfe + 1
            values = p_x0.argmax(-1) if noise_removal == "greedy" else self.categorical(p_x0, generator)
            x = x.masked_scatter(masked, values)
        return Generation(x, nfe)

    def num_params(self, non_embedding: bool = True) -> int:
        return count_params(self, non_embedding)


def mdlm_flops_per_token(cfg) -> float:
    """Training FLOPs per token: the token LM's formula (``token_lm_flops_per_token``: 6 N_matmul +
    12 L d T, full attention already counted) with the V + 1-way head. The loss reads only masked rows
    (a fraction t), but the convention counts the head for every token, as the token LM's."""
    return token_lm_flops_per_token(dataclasses.replace(cfg, vocab_size=cfg.vocab_size + 1))
