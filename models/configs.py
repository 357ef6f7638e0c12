"""Every model family's typed settings: the config dataclasses the registry (``models.registry``) maps
``model.arch`` to, each field's default with its source, and the checks each config makes of itself.

They live apart from the modules that build the models so that reading and checking a profile needs no
torch: the Snakefile validates every experiment's model settings when it parses a profile, and a data or
table job imports no model. Each section is named after the module whose model the config builds
(``models.token_lm``, ``models.conceptlm``, ...); that module's docstring tells the model's story, this
one its settings. ``models.llama`` and ``models.contextlm`` hold their configs themselves (they build no
module of their own).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

from models.fields import Activation, Norm, Positional, check_fields, check_keys, check_transformer, off_switch


# --- models.token_lm --------------------------------------------------------------------------------------------


ROPE_SCALING = ("rope_type", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


@dataclass(frozen=True)
class TransformerFields:
    """The fields every transformer of the suite has, first and in this order (the data fixes ``vocab_size`` and
    ``seq_len``); the backbones (``TokenLMConfig``) and NCM's two stages (``NCMTransformerFields``) add theirs.
    Defaults: GPT-2's (4 d MLP, biases, LayerNorm eps 1e-5), no dropout."""
    vocab_size: int
    seq_len: int
    d_model: int
    n_layer: int
    n_head: int
    mlp_ratio: int = 4
    dropout: float = 0.0
    bias: bool = True
    norm_eps: float = 1e-5

    def __post_init__(self):
        check_fields(self)
        check_transformer(self)


@dataclass(frozen=True)
class TokenLMConfig(TransformerFields):
    """Hyper-parameters of a GPT-2-style token LM. Every default, with its source (HF = ``transformers``
    ``GPT2Config`` / ``GPT2PreTrainedModel._init_weights``; G = the ConceptLM authors' GPT-2 code,
    ``ConceptLM_GPT2model.py``, docs/sources.md, "ConceptLM: the authors' code"):

    * ``mlp_ratio`` 4: MLP width 4 d (HF ``n_inner=None``).
    * ``dropout`` 0.0: HF's GPT-2 has 0.1 on embeddings, residuals and attention, and G reads its dropout
      from the checkpoint config (``config.embd_pdrop``, G L184), which is not released; we use 0.0 as
      nanoGPT's pre-training recipe and Pythia do (switch ``dropout``).
    * ``bias`` True: biases in every projection and norm (HF ``Conv1D``, ``nn.LayerNorm``).
    * ``norm_eps`` 1e-5 (HF ``layer_norm_epsilon``); ``norm`` layernorm, pre-norm blocks, final norm
      ``ln_f`` before the head (HF ``GPT2Model.ln_f``).
    * ``activation`` gelu_tanh (HF ``gelu_new``); ``positional`` learned (``wpe``, HF).
    * ``tie_embeddings`` **False**: the head is a separate ``nn.Linear(d, V, bias=False)``. GPT-2 itself
      (HF ``GPT2LMHeadModel``, ``tie_word_embeddings=True``) ties it to ``wte``, but the ConceptLM
      authors' GPT-2 code keeps ``wte`` and ``lm_head`` apart (G L180-181; its ``tie_weights()`` does
      nothing, G L477), for ConceptLM and for its ``'baseline'`` branch alike. With the GPT-2 fusion
      ``ln_f(h) + ln_f(c_hat)`` at insertion depth 0 the decoder's residual stream starts from the
      unit-normalised input embedding, which a tied head maps back to the input token.
      Base and PM GPT-2 are untied too, so that every GPT-2 arm of a table has the same head. The switch
      (``tie_embeddings: true``) stays for diagnostic rows; an imported HF GPT-2 keeps its tie
      (``models.hf_gpt2``).
    * ``init_std`` 0.02: N(0, 0.02) for every matrix and embedding (``wte`` and ``wpe`` included),
      zero biases, unit norm gains (HF ``initializer_range``, ``_init_weights``; ``blocks.init_weights``).
    * ``scale_residual_init`` True: the attention and MLP output projections start at
      0.02 / sqrt(2 ``n_layer``), with the *model's* ``n_layer`` for every block it builds (HF
      ``GPT2PreTrainedModel._init_weights`` scales every ``GPT2Attention`` / ``GPT2MLP`` ``c_proj`` by
      ``config.n_layer``, the blocks of G's concept module included, since they are built from the same
      config); False leaves them at 0.02 (GPT-NeoX, Llama).
    * Attention: softmax scale 1/sqrt(head dim), causal (HF ``scale_attn_weights``).
    """
    activation: Activation = "gelu_tanh"  # gelu_tanh (GPT-2) | gelu (GPT-NeoX) | swiglu (Llama)
    positional: Positional = "learned"  # learned (GPT-2) | rotary (GPT-NeoX, Llama)
    rotary_pct: float = 1.0
    rotary_base: float = 10000.0
    parallel_residual: bool = False
    tie_embeddings: bool = False       # untied, as the ConceptLM authors' GPT-2 code (see above); true = GPT-2's tie
    init_std: float = 0.02
    scale_residual_init: bool = True   # output projections x 1/sqrt(2 n_layer) at init (HF GPT-2) | none (NeoX, Llama)
    norm: Norm = "layernorm"           # layernorm | rmsnorm (Llama)
    n_kv_head: int | None = None       # key/value heads (grouped-query attention); None = n_head
    mlp_hidden: int | None = None      # MLP width; None = mlp_ratio * d_model
    rope_scaling: dict | None = None   # Llama 3.1 rotary scaling, transformers' rope_parameters layout

    def __post_init__(self):
        super().__post_init__()
        if not 0 < self.rotary_pct <= 1:
            raise ValueError(f"model.rotary_pct={self.rotary_pct}: use the rotated share of a head, in (0, 1]")
        if self.rotary_base <= 0:
            raise ValueError(f"model.rotary_base={self.rotary_base}: use a number > 0")
        if self.n_kv_head is not None and (self.n_kv_head < 1 or self.n_head % self.n_kv_head):
            raise ValueError(f"model.n_kv_head={self.n_kv_head} does not divide model.n_head={self.n_head}; "
                             "choose a divisor of n_head (n_head itself = no grouping)")
        if self.mlp_hidden is not None and self.mlp_hidden < 1:
            raise ValueError(f"model.mlp_hidden={self.mlp_hidden}: use a positive width (null = mlp_ratio * d_model)")
        rope = self.rope_scaling
        if rope is not None and (set(ROPE_SCALING) - set(rope) or rope["rope_type"] != "llama3"):
            raise ValueError(f"model.rope_scaling={self.rope_scaling!r}: give rope_type llama3 and "
                             f"{', '.join(ROPE_SCALING[1:])} (Llama 3.1's), or null")

    def loss_names(self) -> tuple[str, ...]:
        """The losses the model's ``forward`` returns under these settings (``train.loss_weights`` keys)."""
        return ("ntp",)

    def trained_losses(self) -> tuple[str, ...]:
        """The losses that can move a weight under these settings: ``loss_names`` less any a setting turns off
        (the profile check refuses a run whose weighted losses are all off or weigh 0)."""
        return self.loss_names()


@dataclass(frozen=True)
class PythiaConfig(TokenLMConfig):
    """GPT-NeoX conventions used by Pythia (HF = ``transformers`` ``GPTNeoXConfig`` / ``GPTNeoXPreTrainedModel``;
    P = the ConceptLM authors' Pythia code, ``ConceptLM_Pythiamodel.py``, docs/sources.md, "ConceptLM: the
    authors' code"):

    * ``activation`` gelu, exact (HF ``hidden_act``); ``parallel_residual`` True (HF ``use_parallel_residual``).
    * ``positional`` rotary on 25 % of each head (HF ``partial_rotary_factor`` 0.25), base 10000 (HF
      ``rope_theta``); no learned positions.
    * ``tie_embeddings`` False: separate ``embed_out`` (HF ``tie_word_embeddings=False``; P L227, its
      ``tie_weights()`` does nothing, P L616).
    * ``bias`` True (HF ``attention_bias``, dense biases); ``norm_eps`` 1e-5 (HF ``layer_norm_eps``), final
      ``final_layer_norm``; ``dropout`` 0.0 (HF ``hidden_dropout`` / ``attention_dropout``; P's
      ``emb_dropout`` is ``Dropout(0.)``).
    * ``init_std`` 0.02 and ``scale_residual_init`` **False**: every matrix and embedding N(0, 0.02), no
      depth scaling of the output projections (HF ``PreTrainedModel._init_weights``, which
      ``GPTNeoXPreTrainedModel`` inherits; the authors' bundled ``modeling_gpt_neox.py`` L70-82 is the
      same, and P builds every layer, concept layers included, under it). EleutherAI's own Pythia runs
      used gpt-neox's ``small_init`` / ``wang_init``, which we do not reproduce; ``scale_residual_init:
      true`` gives GPT-2's 1/sqrt(2 n_layer).
    """
    activation: Activation = "gelu"
    positional: Positional = "rotary"
    rotary_pct: float = 0.25
    parallel_residual: bool = True
    tie_embeddings: bool = False
    scale_residual_init: bool = False


# What GPT2LMHeadModel can hold (besides one key/value head per head): learned positions, sequential
# residual, biases, gelu_new, LayerNorm.
GPT2_CONVENTIONS = {"positional": "learned", "parallel_residual": False, "bias": True, "activation": "gelu_tanh",
                    "norm": "layernorm"}


def gpt2_mismatch(cfg) -> tuple[str, object] | None:
    """(field, value) of the first setting of a token LM config that GPT2LMHeadModel cannot hold, or None."""
    for key, value in GPT2_CONVENTIONS.items():
        if getattr(cfg, key) != value:
            return key, getattr(cfg, key)
    if cfg.n_kv_head not in (None, cfg.n_head):
        return "n_kv_head", cfg.n_kv_head
    return None


# --- models.conceptlm -------------------------------------------------------------------------------------------


Predictor = Literal["codebook", "linear"]  # S heads x N coefficients over the codes (ConceptLM) | linear (ContextLM)


@dataclass(frozen=True)
class ConceptOptions:
    """Concept-path fields, mixed into a backbone config (``models.registry``). Defaults: §4.1 and
    the Pythia code; the switch each field resolves is named beside it."""
    # The authors' code per backbone (the table of ``models.conceptlm``). GPT-2: L0 (§4.1, Table 14); G's fusion
    # ln_f(h) + ln_f(c_hat) (docs/sources.md, "ConceptLM: the authors' code", item 11), no norm after the
    # concept layers (item 2), one bias-free linear code transform (item 4) and the VQ loss summed over
    # segments (item 6). Llama: no norm after the concept layers (L L756-773). Pythia: the field defaults
    # below (P).
    backbone_defaults: ClassVar[dict] = {
        "gpt2": {"insert_layer": 0, "fusion": "norm_add", "concept_norm": False, "code_transform": "linear",
                 "vq_segment_reduction": "sum"},
        "llama": {"concept_norm": False},
    }

    chunk_size: int = 4                  # k tokens per concept (§4.1; Table 18 ablates 2/4/8/16)
    insert_layer: int = 1                # encoder depth: Pythia/Llama first layer (§4.1, App. B.2)
    concept_layers: int = 2              # concept transformer depth (§4.1; Table 5 ablates 6, 10)
    concept_norm: bool = True            # final norm after the concept layers (Pythia code: yes; GPT-2, Llama code: no)
    predictor: Predictor = "codebook"    # codebook: S heads x N coefficients over codes (§2.3); linear: ContextLM
    codebook_size: int = 64              # N codes per segment (§4.1; Table 16)
    n_segments: int | None = None        # S segments; None = n_head (§4.1; Table 17)
    code_transform: Literal["mlp", "linear"] = "mlp"  # SimVQ 2-layer MLP + ReLU (§4.1, App. E.3; P, L code) |
    #                                                    linear (G code)
    coefficients: Literal["raw", "softmax"] = "raw"   # raw head outputs (code; §2.3 calls them probabilities and
    #                                                    logits) | softmax
    fusion: Literal["add", "norm_add", "norm_only"] = "add"  # h + c_hat (Pythia 'rawadd') | norm_add: ln_f(h) +
    #                                                    ln_f(c_hat) (GPT-2 code) | norm_only: ln_f(h) (diagnostic)
    ncp: bool = True                     # compute the NCP loss (§3; Table 4 ablates it)
    ncp_reduction: Literal["mean", "norm"] = "mean"   # mean over all elements (code) | norm: ||.||^2 per chunk, mean
    #                                                    (§3 formula)
    ncp_detach_target: bool = True       # stop-gradient on the NCP target (code; not in the §3 formula)
    vq: bool = True                      # compute the VQ loss (§3; Table 4 ablates it)
    vq_beta: float = 0.25                # commitment weight (not in the paper; library default)
    vq_segment_reduction: Literal["mean", "sum"] = "mean"  # over segments: mean (Pythia/Llama code) | sum (GPT-2 code)
    vq_detach_input: bool = True         # quantise detached states (§3 text, Fig. 3, code) | attached (§3 formula)

    def __post_init__(self):
        super().__post_init__()
        k, n_chunks = self.chunk_size, self.seq_len // max(self.chunk_size, 1)
        if k < 1 or self.seq_len % k:
            raise ValueError(f"model.chunk_size={k} does not divide model.seq_len={self.seq_len}; "
                             "choose a chunk size that divides the sequence length")
        if self.ncp and n_chunks < 2:
            raise ValueError(f"model.seq_len={self.seq_len} holds {n_chunks} chunk of model.chunk_size={k}; "
                             "NCP needs two: raise seq_len or lower chunk_size")
        if not 0 <= self.insert_layer <= self.n_layer:
            raise ValueError(f"model.insert_layer={self.insert_layer} is beyond model.n_layer={self.n_layer}; "
                             f"choose 0..{self.n_layer} (0 = before the first layer)")
        if self.concept_layers < 1:
            raise ValueError(f"model.concept_layers={self.concept_layers}: use at least 1 concept layer")
        if self.segments < 1 or self.d_model % self.segments:
            raise ValueError(f"model.n_segments={self.segments} does not divide model.d_model={self.d_model}; "
                             "choose S dividing d_model (default: n_head)")
        if self.codebook_size < 2:
            raise ValueError(f"model.codebook_size={self.codebook_size}: a codebook needs N >= 2 codes")
        if self.vq and self.predictor != "codebook":
            raise ValueError("model.vq=true needs model.predictor='codebook'; set vq: false for a linear predictor")
        if self.vq_beta < 0:
            raise ValueError(f"model.vq_beta={self.vq_beta} must be >= 0")

    @property
    def segments(self) -> int:
        return self.n_segments or self.n_head

    def loss_names(self) -> tuple[str, ...]:
        """NTP, NCP and, with a codebook, VQ; a term switched off (``ncp``/``vq`` false, Table 4) keeps its
        name, so an inherited weight stays valid."""
        return ("ntp", "ncp") + (("vq",) if self.predictor == "codebook" else ())

    def trained_losses(self) -> tuple[str, ...]:
        """``loss_names`` less the terms ``ncp`` / ``vq`` switch off."""
        return tuple(name for name in self.loss_names() if name == "ntp" or getattr(self, name))


# --- models.mtp -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MTPOptions:
    """Mixed into a backbone config (``models.registry``)."""
    n_future: int = 4           # tokens predicted at every position, the next one included (Table 4: 4)
    mtp_reduction: Literal["sum", "mean"] = "sum"  # future heads' losses: sum (Gloeckle et al. 2024 §2, L_n) | mean

    def __post_init__(self):
        super().__post_init__()
        if self.n_future < 2:
            raise ValueError(f"model.n_future={self.n_future}: MTP predicts at least 2 future tokens")

    def loss_names(self) -> tuple[str, ...]:
        return ("ntp", "mtp")


# --- models.dlcm ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DLCMOptions:
    """DLCM fields, mixed into a backbone config (``models.registry``: ``dlcm_gpt2``, ``dlcm_pythia``,
    ``dlcm_llama``). The backbone's ``d_model`` / ``n_head`` / ``n_kv_head`` are the token side (d_token,
    Table 3: 1536, 24 heads, 12 KV heads) and its ``n_layer`` the token layers, encoder + decoder
    (Table 3: 10 + 6). Sources and "open N" as in the ``models.dlcm`` docstring."""
    # --- widths and depths (Table 3) ---
    d_concept: int | None = None          # None = 2 d_model (Table 3: 3072 = 2 x 1536)
    concept_heads: int | None = None      # None = 2 n_head (Table 3: 48 = 2 x 24; the head width is kept)
    concept_kv_heads: int | None = None   # None = the token side's grouping (Table 3: 24 of 48, as 12 of 24)
    concept_layers: int | None = None     # None = n_layer (Table 3: backbone 16 = encoder 10 + decoder 6)
    concept_share: float | None = None    # P of the scaling law (Eq. 22): the concept blocks' share of the
    #                                       matrices; sets the depth whose share is closest (overrides concept_layers)
    concept_mlp_hidden: int | None = None  # None = the backbone's MLP ratio at d_concept (Table 3 prints one 6144)
    decoder_layers: int | None = None     # None = round(6/16 n_layer), >= 1 (Table 3: 6 of 16); encoder = the rest
    decoder_skip: Literal["identity", "zero_proj"] = "identity"  # the first cross block's "+ H": identity (the
    #                                       paper's Psi) | zero_proj: a zero-initialised Linear of H (H-Net
    #                                       hnet.py:106-109)
    token_window: int | None = off_switch()  # diagnostic (ours, not the paper's): the encoder's and decoder's
    #                                       self-attention see the last token_window tokens only, so context
    #                                       more than n_layer (token_window - 1) tokens back reaches a token
    #                                       through the concepts alone
    cross_layers: Literal["first", "every"] = "first"  # first: one cross block opens the decoder (the paper's Psi,
    #                                       written once) | every: one before each decoder layer (ours; Table 3's
    #                                       cross MLP fits both)
    # --- boundaries ("Boundary predictor", §3.3; rule-based §8.1) ---
    boundary_predictor: Literal["learned", "rule"] = "learned"  # learned: q/k cosine router (§3.3; H-Net dc.py) |
    #                                       rule: adjacent h (§8.1)
    boundary_threshold: float = 0.5       # tau: b = [p >= tau] at inference (§3.3: 0.5); the rule's tau (unreported)
    boundary_calibration: Literal["fixed", "quantile"] = "fixed"  # fixed: tau = boundary_threshold | quantile:
    #                                       tau a running quantile of p that opens T / R segments per window,
    #                                       updated in training, frozen at inference (ours; §8.1's tau is unreported)
    calibration_momentum: float = 0.1     # the quantile's EMA weight per training forward (ours)
    boundary_temperature: float = 0.5     # alpha of the training Bernoulli (§3.3; unreported, open 1: ours);
    #                                       0 = the threshold in training too (H-Net dc.py samples nothing)
    d_scan: int | None = None             # width of q, k (unreported, open 1); None = d_model (H-Net: Linear(d, d))
    router_lm_gradient: bool = True       # the LM loss reaches p (STE gate, EMA; H-Net; the paper's
    #                                       CE-gradient account) | false: p learns from L_aux alone (§3.3:
    #                                       decoupled from the LM loss)
    # --- concepts and decoder ---
    smoothing: Literal["ema", "none"] = "ema"  # S(Z) (unspecified, open 2): ema = H-Net's dechunk EMA | none
    decoder_attention: Literal["replicate", "mask"] = "replicate"  # replicate: concepts copied to token positions +
    #                                       causal SDPA (Eq. 17) | mask: explicit masked cross-attention over the
    #                                       concepts (the reference)
    concept_weighting: Literal["count", "uniform"] = "count"  # count: what replication computes (models.dlcm) |
    #                                       uniform: Psi's plain cross-attention (decoder_attention: mask only)
    null_concept: Literal["first_segment"] | None = off_switch()  # who sees the learned null concept: null = every
    #                                       token (ours so far: a constant every row of the softmax can rest on) |
    #                                       first_segment: the tokens of segment 0 only, which see no concept yet;
    #                                       the others attend over real concepts alone, as Psi has no null
    #                                       (decoder_attention: mask only)
    cross_positions: Literal["rotary"] | None = off_switch()  # the cross-attention's positions: null (the paper's Psi:
    #                                       no position term) | rotary: RoPE on Q at the token's position and on
    #                                       each replicated K at the position of its copy (ours; replication only)
    # --- compression loss ("Global Parser", Eq. 10; Table 4) ---
    target_ratio: float = 4.0             # R tokens per concept (Table 4; §8.2 text says 2, open 3)
    aux_weight: float = 0.03              # lambda (§3.6; unreported, open 1): H-Net PR #13's train.py 0.03
    parser: Literal["global", "sequence"] = "global"  # global: F, G over the distributed, accumulated batch (Table 4
    #                                       Global Parser) | sequence: per sequence, averaged (Table 4 "Normal")
    # --- decoupled muP ("Decoupled muP", §6.1) ---
    mup_base_width: int | None = None     # d_base (unreported, open 1); None = no muP (s_token = s_concept = 1)
    mup_concept_lr_ratio: float = 1.0     # eta_base^concept / eta_base^token (§6.1.2: about 1 on the 87M proxy)
    mup_bridge: Literal["fan_in", "module"] = "fan_in"  # group of W_up and cross K/V: fan_in (muP's Adam rule; ours) |
    #                                       module (by module, as §6.1 lists E, M, D)

    def __post_init__(self):
        super().__post_init__()
        if self.concept_width < 1 or self.concept_n_head < 1 or self.concept_width % self.concept_n_head:
            raise ValueError(f"model.d_concept={self.concept_width} is not divisible by model.concept_heads="
                             f"{self.concept_n_head}; choose concept heads dividing d_concept")
        if self.concept_n_kv_head < 1 or self.concept_n_head % self.concept_n_kv_head:
            raise ValueError(f"model.concept_kv_heads={self.concept_n_kv_head} does not divide model.concept_heads="
                             f"{self.concept_n_head}; choose a divisor (concept_heads itself = no grouping)")
        if self.concept_share is not None and not 0 < self.concept_share < 1:
            raise ValueError(f"model.concept_share={self.concept_share}: use 0 < P < 1, the concept backbone's share "
                             "of the parameters (Eq. 22), or null to set model.concept_layers")
        if self.concept_depth < 1:
            raise ValueError(f"model.concept_layers={self.concept_depth}: use at least 1 concept layer")
        if not 0 <= self.n_decoder <= self.n_layer:
            raise ValueError(f"model.decoder_layers={self.n_decoder} must be in [0, model.n_layer={self.n_layer}]; "
                             "the encoder has the other n_layer - decoder_layers token layers")
        if self.token_window is not None and not 1 <= self.token_window < self.seq_len:
            raise ValueError(f"model.token_window={self.token_window}: use 1 <= w < model.seq_len={self.seq_len} "
                             "tokens (w >= seq_len is the whole window), or null for the whole window (the paper)")
        if self.concept_mlp_hidden is not None and self.concept_mlp_hidden < 1:
            raise ValueError(f"model.concept_mlp_hidden={self.concept_mlp_hidden}: use a positive width "
                             "(None = the backbone's ratio)")
        if self.scan_width < 1:
            raise ValueError(f"model.d_scan={self.d_scan}: use a positive width (None = d_model)")
        if not 0 < self.boundary_threshold < 1:
            raise ValueError(f"model.boundary_threshold={self.boundary_threshold}: use 0 < threshold < 1 (0.5, §3.3)")
        if not 0 < self.calibration_momentum <= 1:
            raise ValueError(f"model.calibration_momentum={self.calibration_momentum}: use 0 < momentum <= 1 "
                             "(1 = each batch's own quantile)")
        if self.boundary_temperature < 0:
            raise ValueError(f"model.boundary_temperature={self.boundary_temperature}: use alpha >= 0 "
                             "(0 = the threshold in training too)")
        if self.target_ratio <= 1:
            raise ValueError(f"model.target_ratio={self.target_ratio}: use R > 1 tokens per concept (4, Table 4); "
                             "the loss divides by R - 1")
        if self.target_ratio > self.seq_len:
            raise ValueError(f"model.target_ratio={self.target_ratio:g} exceeds model.seq_len={self.seq_len}: a window "
                             "holds at least one concept; use R <= seq_len (4, Table 4)")
        if self.aux_weight < 0:
            raise ValueError(f"model.aux_weight={self.aux_weight}: use lambda >= 0 (0 = no compression loss)")
        if self.cross_positions == "rotary" and self.decoder_attention != "replicate":
            raise ValueError("model.cross_positions='rotary' places a concept's keys at the positions of its copies, "
                             "which only replication has; set model.decoder_attention: replicate")
        if self.null_concept == "first_segment" and self.decoder_attention == "replicate":
            raise ValueError("model.null_concept='first_segment' hides the null's copies from the later segments, "
                             "which replication's causal attention cannot; set model.decoder_attention: mask")
        if self.concept_weighting == "uniform" and self.decoder_attention == "replicate":
            raise ValueError("model.concept_weighting='uniform' cannot be computed by replication (it weights a "
                             "concept by its copies); set model.decoder_attention: mask")
        if self.mup_base_width is not None and self.mup_base_width < 1:
            raise ValueError(f"model.mup_base_width={self.mup_base_width}: use a positive d_base (None = no muP)")
        if self.mup_concept_lr_ratio <= 0:
            raise ValueError(f"model.mup_concept_lr_ratio={self.mup_concept_lr_ratio}: use a positive ratio "
                             "(about 1, §6.1.2)")

    # resolved defaults -----------------------------------------------------------------------------
    @property
    def concept_width(self) -> int:
        return self.d_concept or 2 * self.d_model

    @property
    def concept_n_head(self) -> int:
        return self.concept_heads or 2 * self.n_head

    @property
    def concept_n_kv_head(self) -> int:
        if self.concept_kv_heads is not None:
            return self.concept_kv_heads
        return max(1, self.concept_n_head * (self.n_kv_head or self.n_head) // self.n_head)

    @property
    def concept_depth(self) -> int:
        if self.concept_share is not None:  # P / (1 - P) = depth x per layer / the token side
            m = matrix_params(self, concept_layers=1)
            return max(1, round(self.concept_share / (1 - self.concept_share) * m["token_side"] / m["concept"]))
        return self.n_layer if self.concept_layers is None else self.concept_layers

    @property
    def concept_hidden(self) -> int:
        if self.concept_mlp_hidden is not None:
            return self.concept_mlp_hidden
        return (self.mlp_hidden or self.mlp_ratio * self.d_model) * self.concept_width // self.d_model

    @property
    def n_decoder(self) -> int:
        if self.decoder_layers is not None:
            return self.decoder_layers
        return min(self.n_layer, max(1, round(6 * self.n_layer / 16)))

    @property
    def n_cross(self) -> int:
        return 1 if self.cross_layers == "first" else max(1, self.n_decoder)

    @property
    def scan_width(self) -> int:
        return self.d_scan or self.d_model

    @property
    def s_token(self) -> float:
        return self.d_model / self.mup_base_width if self.mup_base_width else 1.0

    @property
    def s_concept(self) -> float:
        return self.concept_width / self.mup_base_width if self.mup_base_width else 1.0

    def loss_names(self) -> tuple[str, ...]:
        """NTP (what valid/loss reports) and lambda L_aux (``aux``)."""
        return ("ntp", "aux")

    def trained_losses(self) -> tuple[str, ...]:
        """``loss_names`` less ``aux`` when lambda (``aux_weight``) is 0."""
        return ("ntp", "aux") if self.aux_weight > 0 else ("ntp",)


def matrix_params(cfg, concept_layers: int | None = None) -> dict[str, int]:
    """Weights of the matrices (biases and norms left out), the counts the FLOPs and the depth that gives
    ``concept_share`` are computed from: ``token_block`` (one token layer), ``router``, ``up`` (W_up),
    ``cross_token`` and ``cross_kv`` (all cross blocks: their token-width matrices, their K/V on
    d_concept), ``token_side`` (every token-width matrix but the embeddings and head),
    ``concept`` (the concept blocks, ``concept_layers`` of them, default the config's depth)."""
    d, dc = cfg.d_model, cfg.concept_width
    kv = (cfg.n_kv_head or cfg.n_head) * (d // cfg.n_head)
    kv_c = cfg.concept_n_kv_head * (dc // cfg.concept_n_head)
    gates = 3 if cfg.activation == "swiglu" else 2
    mlp = gates * d * (cfg.mlp_hidden or cfg.mlp_ratio * d)
    token_block = 2 * d * d + 2 * d * kv + mlp
    router = 2 * d * cfg.scan_width if cfg.boundary_predictor == "learned" else 0
    skip = d * d if cfg.decoder_skip == "zero_proj" else 0  # the first cross block's W_r
    cross_token, cross_kv = cfg.n_cross * (2 * d * d + mlp) + skip, cfg.n_cross * 2 * dc * kv
    depth = cfg.concept_depth if concept_layers is None else concept_layers
    concept = depth * (2 * dc * dc + 2 * dc * kv_c + gates * dc * cfg.concept_hidden)
    return {"token_block": token_block, "router": router, "up": d * dc, "cross_token": cross_token,
            "cross_kv": cross_kv, "concept": concept,
            "token_side": cfg.n_layer * token_block + router + d * dc + cross_token + cross_kv}


# --- models.mdlm ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MDLMOptions:
    """Mixed into a backbone config (``models.registry``: ``mdlm_gpt2``, ``mdlm_pythia``, ``mdlm_llama``)."""
    noise_eps: float = 1e-3      # log-linear schedule alpha_t = 1 - (1 - eps) t (duo trainer_base.py:25-38)
    sampling_eps: float = 1e-3   # training times t ~ U[eps, 1] (mdlm ``training.sampling_eps``, diffusion.py:800-808)
    antithetic: bool = True      # stratified t over the batch (mdlm ``training.antithetic_sampling``)
    prefix_len: int = 0          # leading source tokens never masked (conditional tasks, as NCM's prefix; ours)

    def __post_init__(self):
        super().__post_init__()
        if not 0 < self.noise_eps < 1:
            raise ValueError(f"model.noise_eps={self.noise_eps}: use 0 < noise_eps < 1 (1e-3, duo LogLinear)")
        if not 0 < self.sampling_eps < 1:
            raise ValueError(f"model.sampling_eps={self.sampling_eps}: use 0 < sampling_eps < 1 (the loss "
                             "weight 1/t is unbounded at t = 0; 1e-3, mdlm)")
        if not 0 <= self.prefix_len < self.seq_len:
            raise ValueError(f"model.prefix_len={self.prefix_len} must be in [0, model.seq_len={self.seq_len}): "
                             "the window is prefix_len source tokens, then the target")

    def loss_names(self) -> tuple[str, ...]:
        return ("nelbo",)


# --- models.ncm_tokenizer ---------------------------------------------------------------------------------------


Schedule = Literal["exponential", "quadratic", "sqrt", "log", "linear"]


SCHEDULES = get_args(Schedule)


DEFAULT_SCALES = 12  # K of NCM's TinyStories and LM1B runs (L 128; App. B-C)


def schedule_lengths(seq_len: int, n_scales: int, schedule: str) -> tuple[int, ...]:
    """l_1 < ... < l_K = L of a named schedule (``models.ncm_tokenizer`` docstring: targets, rounding, clamping)."""
    L, K = seq_len, n_scales
    if schedule not in SCHEDULES:
        raise ValueError(f"model.length_schedule={schedule!r}: use one of {list(SCHEDULES)}")
    if not 1 <= K <= L:
        raise ValueError(f"model.n_scales={K} must be between 1 and model.seq_len={L} (K scales need K distinct "
                         "lengths <= L); lower n_scales or raise seq_len")
    lengths, prev = [], 0
    for k in range(1, K + 1):
        u = k / K
        target = {"exponential": L ** u, "quadratic": L * u * u, "sqrt": L * math.sqrt(u), "linear": L * u,
                  "log": L * math.log1p(k) / math.log1p(K)}[schedule]
        prev = min(max(math.floor(target + 0.5), prev + 1), L - (K - k))
        lengths.append(prev)
    return tuple(lengths)


@dataclass(frozen=True)
class NCMTransformerFields(TransformerFields):
    """The transformer fields the NCM tokenizer and generator share, named as the suite's backbones
    (``models.token_lm``) so a profile's ``defaults.model`` applies. Defaults are GPT-2's (*ours*: NCM's
    architectures are UNKNOWN): pre-norm blocks, 4 d MLP, tanh GELU, biases, LayerNorm eps
    1e-5, N(0, 0.02) init with output projections x 1/sqrt(2 n_layer) (VAR divides them by sqrt(2 depth)
    too, VAR 4), no dropout."""
    activation: Activation = "gelu_tanh"
    norm: Norm = "layernorm"
    init_std: float = 0.02

    def trained_losses(self) -> tuple[str, ...]:
        """Every loss of ``loss_names`` trains (none has an off switch)."""
        return self.loss_names()


@dataclass(frozen=True)
class NCMTokenizerConfig(NCMTransformerFields):
    """Arch ``ncm_tokenizer``. Each field's source beside it (``models.ncm_tokenizer`` docstring for the operators)."""
    dec_layers: int | None = None       # decoder depth; None = n_layer (ours; NCM's depths UNKNOWN)
    d_code: int = 32                    # latent / code width d (VAR Cvae 32; NCM's d UNKNOWN)
    codebook_size: int = 4096           # codes per codebook |V_k| (VAR V 4096; NCM's UNKNOWN)
    codebook_sizes: tuple | None = None  # |V_1..V_K| per scale, overrides codebook_size (notation |V_k|, Sec.
    #                                      3.2; sizes UNKNOWN): small coarse books bound the coarse codes' entropy
    shared_codebook: bool = False       # one codebook per scale (NCM notation e_{k,j}, |V_k|) | shared (VAR)
    n_scales: int | None = None         # K; None = len(scale_lengths), else 12 (NCM TinyStories / LM1B, App. B-C)
    length_schedule: Schedule = "exponential"  # l_k schedule (App. F.1: exponential best; models.ncm_tokenizer)
    scale_lengths: tuple | None = None  # explicit l_1 < ... < l_K = L; overrides length_schedule
    down: Literal["area", "linear"] = "area"  # Down_k: area pooling (VAR) | linear interpolation
    up: Literal["linear", "nearest"] = "linear"  # R_k interpolation: linear (VAR's bicubic in 1-D) | nearest
    phi_ratio: float = 0.5              # phi blend r: (1-r) h + r conv(h) (VAR quant_resi 0.5); 0 = no phi
    phi_share: int = 4                  # phi convs: 0 per scale | 1 shared | n partially shared (VAR 4)
    vq_beta: float = 0.25               # commitment weight beta (VAR vqvae.py 0.25; NCM's UNKNOWN)
    vq_scales: Literal["all", "last"] = "all"  # VQ loss on zhat^(j) for all j <= k, averaged (VAR) | last: zhat^(k)
    #                                            only (Eq. 9)
    straight_through: Literal["latent", "scale", "anchored"] = "latent"  # decoder gradient to z at L (VAR) | through
    #                                     each scale's Down_k / R_k | both: truncated per scale + full at L (ours;
    #                                     models.ncm_tokenizer, 5.)
    nested_dropout: float = 1.0         # P(truncate a sequence to k ~ U{1..K} scales) (Sec. 3.3: every step)
    tie_embeddings: bool = False        # decoder head tied to the encoder's token embedding (ours: untied)
    latent_norm: bool = True            # z = LayerNorm without affine of the code projection (ours) | raw (VAR)
    code_init_std: float = 0.3          # codebook init N(0, s^2) (ours; VAR's is not in docs/sources.md)
    dead_code_threshold: float = 0.1    # restart codes used < this x the uniform rate (EMA); 0 = never (ours, see 3.)
    dead_code_decay: float = 0.99       # EMA decay of the code usage counts (SoundStream / EnCodec's)

    def __post_init__(self):
        super().__post_init__()
        if self.scale_lengths is not None:
            ls = list(self.scale_lengths)
            if not ls or not all(isinstance(v, int) and not isinstance(v, bool) for v in ls):
                raise ValueError(f"model.scale_lengths={ls}: give a non-empty list of integers l_1 < ... < l_K")
            if any(b <= a for a, b in zip(ls, ls[1:])) or ls[0] < 1:
                raise ValueError(f"model.scale_lengths={ls} is not strictly increasing from >= 1; give "
                                 "l_1 < ... < l_K = seq_len")
            if ls[-1] != self.seq_len:
                raise ValueError(f"model.scale_lengths={ls} ends at {ls[-1]}, not at model.seq_len={self.seq_len}; "
                                 "the finest scale must have one code per token")
            if self.n_scales is not None and self.n_scales != len(ls):
                raise ValueError(f"model.n_scales={self.n_scales} but model.scale_lengths has {len(ls)} entries; "
                                 "drop n_scales or make them agree")
        else:
            schedule_lengths(self.seq_len, self.K, self.length_schedule)  # raises on K outside 1..L
        if self.codebook_size < 2:
            raise ValueError(f"model.codebook_size={self.codebook_size}: a codebook needs at least 2 codes")
        if self.codebook_sizes is not None:
            vs = list(self.codebook_sizes)
            if len(vs) != self.K or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 2 for v in vs):
                raise ValueError(f"model.codebook_sizes={vs}: give K={self.K} integers >= 2, one codebook size "
                                 "per scale (coarse to fine), or drop it for codebook_size at every scale")
            if self.shared_codebook and len(set(vs)) > 1:
                raise ValueError(f"model.codebook_sizes={vs} differ but model.shared_codebook is true "
                                 "(one codebook for all scales); set shared_codebook: false or give one size")
        if self.d_code < 1:
            raise ValueError(f"model.d_code={self.d_code}: the code width must be >= 1")
        if self.dec_layers is not None and self.dec_layers < 1:
            raise ValueError(f"model.dec_layers={self.dec_layers}: the decoder needs at least 1 layer")
        if not 0.0 <= self.phi_ratio <= 1.0:
            raise ValueError(f"model.phi_ratio={self.phi_ratio} must be in [0, 1] (0 = no phi refinement)")
        if self.phi_share < 0:
            raise ValueError(f"model.phi_share={self.phi_share}: use 0 (one phi per scale), 1 (shared) or n > 1")
        if not 0.0 <= self.nested_dropout <= 1.0:
            raise ValueError(f"model.nested_dropout={self.nested_dropout} is a probability: use a value in [0, 1]")
        if self.vq_beta < 0:
            raise ValueError(f"model.vq_beta={self.vq_beta} must be >= 0")
        if self.code_init_std <= 0:
            raise ValueError(f"model.code_init_std={self.code_init_std} must be > 0")
        if not 0.0 <= self.dead_code_threshold < 1.0:
            raise ValueError(f"model.dead_code_threshold={self.dead_code_threshold}: a fraction of the uniform usage "
                             "rate in [0, 1) (0 = no restarts)")
        if not 0.0 < self.dead_code_decay < 1.0:
            raise ValueError(f"model.dead_code_decay={self.dead_code_decay} must be in (0, 1)")

    @property
    def K(self) -> int:
        if self.scale_lengths is not None:
            return len(self.scale_lengths)
        return self.n_scales if self.n_scales is not None else DEFAULT_SCALES

    @property
    def lengths(self) -> tuple[int, ...]:
        """(l_1, ..., l_K)."""
        if self.scale_lengths is not None:
            return tuple(int(v) for v in self.scale_lengths)
        return schedule_lengths(self.seq_len, self.K, self.length_schedule)

    @property
    def sizes(self) -> tuple[int, ...]:
        """(|V_1|, ..., |V_K|): ``codebook_sizes``, else ``codebook_size`` at every scale."""
        if self.codebook_sizes is not None:
            return tuple(int(v) for v in self.codebook_sizes)
        return (self.codebook_size,) * self.K

    @property
    def decoder_layers(self) -> int:
        return self.dec_layers or self.n_layer

    def loss_names(self) -> tuple[str, ...]:
        return ("rec", "vq")


# --- models.ncm -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NCMConfig(NCMTransformerFields):
    """Arch ``ncm``: the generator's transformer (``NCMTransformerFields``) and the fields below."""
    tokenizer: dict | None = None       # the upstream ncm_tokenizer's model config (arch + fields); required
    attention: Literal["block_diagonal", "block_causal"] = "block_diagonal"  # each scale sees itself (NCM App. F.2,
    #                                     Table 9) | block_causal: itself and coarser scales (VAR; Table 9 ablation)
    perturb_rate: float = 0.1           # conditioning-code perturbation p (NCM App. F.3; rate UNKNOWN: ours)
    head: Literal["shared", "per_scale"] = "shared"  # one code head for all scales (VAR) | one per scale (ours;
    #                                     ``models.ncm`` docstring)
    alpha: float = 0.0                  # loss weights w_k = l_k^-alpha / sum_j l_j^(1-alpha) (Eq. 10; ours: 0, VAR)
    prefix_len: int = 0                 # source tokens before the target window (conditional, Sec. 3.4); 0 = none
    cond_dropout: float = 0.1           # P(source replaced by the null condition) in training, for guidance (ours:
    #                                     VAR's 0.1)

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 <= self.perturb_rate < 1.0:
            raise ValueError(f"model.perturb_rate={self.perturb_rate} is a probability: use a value in [0, 1)")
        if not 0 <= self.prefix_len < self.seq_len:
            raise ValueError(f"model.prefix_len={self.prefix_len} must be in [0, model.seq_len={self.seq_len}): "
                             "the window is prefix_len source tokens followed by the tokenizer's L target tokens")
        if not 0.0 <= self.cond_dropout < 1.0:
            raise ValueError(f"model.cond_dropout={self.cond_dropout} is a probability: use a value in [0, 1)")
        if not -10.0 <= self.alpha <= 10.0:
            raise ValueError(f"model.alpha={self.alpha}: use a loss-weight exponent in [-10, 10] (the paper: 0..1.5)")
        _ = self.tokenizer_config  # validates model.tokenizer

    @property
    def target_len(self) -> int:
        """L, the tokens the tokenizer encodes: the window after the ``prefix_len`` source tokens."""
        return self.seq_len - self.prefix_len

    @property
    def tokenizer_config(self) -> NCMTokenizerConfig:
        """The typed config of ``model.tokenizer``, with this model's vocabulary and L."""
        if not isinstance(self.tokenizer, dict):
            raise ValueError("model.tokenizer is required for arch ncm: the upstream ncm_tokenizer experiment's model "
                             "config (arch and fields)")
        fields = dict(self.tokenizer)
        arch = fields.pop("arch", "ncm_tokenizer")
        if arch != "ncm_tokenizer":
            raise ValueError(f"model.tokenizer.arch={arch!r}: the generator needs an ncm_tokenizer run's model config")
        ours = {"seq_len": self.target_len, "vocab_size": self.vocab_size}
        for key, value in ours.items():
            if key in fields and fields.pop(key) != value:
                raise ValueError(f"model.tokenizer.{key}={self.tokenizer[key]} but the generator's target window has "
                                 f"{key} {value} (model.seq_len - model.prefix_len for seq_len); point model.tokenizer "
                                 f"at a tokenizer run with {key} {value}")
        check_keys(NCMTokenizerConfig, fields, "ncm_tokenizer", "model.tokenizer", fixed=ours)
        try:
            return NCMTokenizerConfig(**fields, vocab_size=self.vocab_size, seq_len=self.target_len)
        except ValueError as e:
            raise ValueError(str(e).replace("model.", "model.tokenizer.")) from None

    def loss_names(self) -> tuple[str, ...]:
        return ("gen",)
