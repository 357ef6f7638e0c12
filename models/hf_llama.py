"""``transformers`` ``LlamaForCausalLM`` weights into our Llama-style models (``models.llama``).

``from_hf_llama`` gives the token LM with identical logits; ``pm_from_hf_llama`` the PM-8B baseline
(two more token layers initialised the same way); ``conceptlm_from_hf_llama`` gives
ConceptLM-Llama for continual pre-training (arXiv 2602.08984 §4.3, Table 3): every backbone weight
copied, and the new concept layers initialised from the backbone's first layers ("the new layers are
initialised from the base's first two layers", §4.3; the released code does not do it, docs/sources.md,
"ConceptLM: the authors' code", item 14). The codebook transform and the coefficient heads start fresh.
``init_from_pretrained`` does the same into a model the trainer built from a profile
(``train.init_from``: Table 3's continual pre-training), after checking every shape setting against the
checkpoint's.

HF keeps q, k, v and gate, up as separate matrices; ours are fused ``[q | k | v]`` and
``[gate | up]`` along the output dimension, so those are concatenated. Both use the "rotate half"
rotary convention on the whole head, and Llama 3.1's rotary scaling is reproduced
(``blocks.llama3_scaled``).
"""
from __future__ import annotations

from pathlib import Path

import torch

from models.conceptlm import ConceptLM
from models.llama import LlamaConfig
from models.registry import get_spec
from models.token_lm import TokenLM

_BLOCK_MAP = {  # ours -> HF parts concatenated along dim 0, per block (same '.weight' / '.bias' suffix)
    "ln1": ["input_layernorm"], "ln2": ["post_attention_layernorm"],
    "attn.qkv": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], "attn.proj": ["self_attn.o_proj"],
    "mlp.fc": ["mlp.gate_proj", "mlp.up_proj"], "mlp.proj": ["mlp.down_proj"],
}


def config_fields(hf_config, seq_len: int | None = None) -> dict:
    """Our Llama config fields (without ``arch``) from a ``transformers`` ``LlamaConfig``."""
    c = hf_config
    if c.hidden_act != "silu" or c.head_dim != c.hidden_size // c.num_attention_heads or c.attention_bias != c.mlp_bias:
        raise ValueError("only Llama models with SiLU, head_dim = hidden_size / heads and attention_bias == "
                         "mlp_bias are supported")
    rope = dict(c.rope_parameters)
    if rope["rope_type"] not in ("default", "llama3"):
        raise ValueError(f"Llama rope_type {rope['rope_type']!r} is not supported (default and llama3 only)")
    scaling = None if rope["rope_type"] == "default" else {k: v for k, v in rope.items() if k != "rope_theta"}
    return dict(vocab_size=c.vocab_size, seq_len=seq_len or c.max_position_embeddings, d_model=c.hidden_size,
                n_layer=c.num_hidden_layers, n_head=c.num_attention_heads, n_kv_head=c.num_key_value_heads,
                mlp_hidden=c.intermediate_size, bias=c.attention_bias, norm_eps=c.rms_norm_eps,
                rotary_base=rope["rope_theta"], rope_scaling=scaling, tie_embeddings=c.tie_word_embeddings,
                dropout=0.0)


@torch.no_grad()
def _copy_backbone(model: TokenLM, hf_model, sources: list[int] | None = None) -> None:
    """Copy embeddings, final norm, head, and block i from HF layer ``sources[i]`` (default i)."""
    hf = hf_model.state_dict()
    for i, block in zip(sources or range(len(model.blocks)), model.blocks):
        for name, param in block.named_parameters():
            ours, suffix = name.rsplit(".", 1)
            param.copy_(torch.cat([hf[f"model.layers.{i}.{part}.{suffix}"] for part in _BLOCK_MAP[ours]]))
    model.wte.weight.copy_(hf["model.embed_tokens.weight"])
    model.ln_f.weight.copy_(hf["model.norm.weight"])
    if not model.cfg.tie_embeddings:
        model.lm_head.weight.copy_(hf["lm_head.weight"])


def from_hf_llama(hf_model, seq_len: int | None = None) -> TokenLM:
    """Our Llama TokenLM holding the weights of a ``LlamaForCausalLM``."""
    model = TokenLM(LlamaConfig(**config_fields(hf_model.config, seq_len)))
    _copy_backbone(model, hf_model)
    return model


def pm_from_hf_llama(hf_model, seq_len: int | None = None, extra_layers: int = 2, insert_at: int = 1) -> TokenLM:
    """PM-8B of Table 3 (§4.3): the backbone plus ``extra_layers`` token layers initialised from its
    first layers, like ConceptLM-8B's concept layers. The paper does not say where they go; we put them
    after the first ``insert_at`` layers, where ConceptLM-Llama inserts its concept module (default L1),
    so the two models differ only in what the new layers run on (tokens vs concepts)."""
    fields = config_fields(hf_model.config, seq_len)
    model = TokenLM(LlamaConfig(**{**fields, "n_layer": fields["n_layer"] + extra_layers}))
    _copy_backbone(model, hf_model, pm_layers(fields["n_layer"], extra_layers, insert_at))
    return model


def pm_layers(n_layer: int, extra_layers: int, insert_at: int = 1) -> list[int]:
    """The backbone layer each PM block starts from: the first ``insert_at``, then the ``extra_layers``
    new ones (copies of the first layers), then the rest."""
    if not 0 <= insert_at <= n_layer or not 0 < extra_layers <= n_layer:
        raise ValueError(f"insert_at={insert_at} and extra_layers={extra_layers} must lie within the "
                         f"{n_layer} backbone layers")
    layers = list(range(n_layer))
    return layers[:insert_at] + layers[:extra_layers] + layers[insert_at:]


@torch.no_grad()
def conceptlm_from_hf_llama(hf_model, seq_len: int | None = None, **options) -> ConceptLM:
    """ConceptLM-Llama (``conceptlm_llama`` options as keywords) on a ``LlamaForCausalLM``'s weights,
    concept layer i initialised from backbone layer i."""
    spec = get_spec("conceptlm_llama")
    cfg = spec.config_cls(**config_fields(hf_model.config, seq_len), **options)
    model = spec.build(cfg)
    _copy_into(model, hf_model)
    return model


def _copy_into(model: TokenLM, hf_model) -> None:
    """The checkpoint's weights into ``model`` as §4.3 starts each Table 3 row: the backbone as it is (Trained);
    with more token layers than the checkpoint, PM (``pm_layers``); ConceptLM's concept layers from the
    backbone's first layers."""
    problem = layer_problem(model, hf_model.config)
    if problem:
        raise ValueError(problem)
    theirs = hf_model.config.num_hidden_layers
    extra = model.cfg.n_layer - theirs
    _copy_backbone(model, hf_model, pm_layers(theirs, extra) if extra else None)
    if isinstance(model, ConceptLM):
        with torch.no_grad():
            for concept_block, block in zip(model.concept_blocks, model.blocks):
                concept_block.load_state_dict(block.state_dict())


CHECKED = ("vocab_size", "d_model", "n_head", "n_kv_head", "mlp_hidden", "bias", "norm_eps", "rotary_base",
           "rope_scaling", "tie_embeddings")


def shape_problem(model: TokenLM, hf_config) -> str | None:
    """The first model setting that differs from the checkpoint's (``model.<key>``: ours, theirs), or None."""
    cfg, theirs = model.cfg, config_fields(hf_config)
    ours = {key: getattr(cfg, key) for key in CHECKED}
    ours["n_kv_head"] = cfg.n_kv_head or cfg.n_head
    ours["mlp_hidden"] = cfg.mlp_hidden or 4 * cfg.d_model
    for key in CHECKED:
        if ours[key] != theirs[key]:
            where = "the tokenizer's vocabulary" if key == "vocab_size" else f"model.{key}"
            return f"{where} is {ours[key]!r}, the checkpoint's {theirs[key]!r}; set it to the checkpoint's"
    return None


def _resolve(source: str, where: str) -> tuple[Path, dict]:
    """The local folder of ``source`` and what identifies its weights: a folder's files by sha256, or a
    hub name's snapshot in the HF cache (downloaded unless HF_HUB_OFFLINE) by its commit."""
    from huggingface_hub import snapshot_download

    from common.errors import ReproError
    from common.hub import looks_like_folder
    from common.io import sha256_file

    folder = Path(source).expanduser()
    if folder.is_dir():
        files = sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin") or p.name == "config.json")
        return folder, {"source": source, "sha256": {p.name: sha256_file(p) for p in files}}
    if looks_like_folder(source):
        raise ReproError(f"{where}: no such folder; fix the path (relative paths start at the working directory)")
    try:
        snapshot = Path(snapshot_download(source, allow_patterns=["*.json", "*.safetensors"]))
    except Exception as e:  # noqa: BLE001 - offline, gated, unknown repo: one line
        raise ReproError(f"{where}: cannot fetch it from the hub ({str(e).splitlines()[0]}); download it first "
                         "(huggingface-cli download, with HF_HUB_OFFLINE unset) or give a local folder") from None
    return snapshot, {"source": source, "commit": snapshot.name}  # the cache's snapshots/<commit>/


def init_from_pretrained(model: TokenLM, source: str) -> dict:
    """Load the ``LlamaForCausalLM`` at ``source`` (a hub name, through the HF cache, or a local folder) into
    ``model`` (``_copy_into``) and return what identifies those weights (``_resolve``). The config is read
    and checked before any weight is: a checkpoint of another family or shape is refused without building
    it. The weights load in their stored dtype (bf16 for Llama-3.1: half the host memory of fp32) and are
    copied into the model's fp32 parameters exactly. Every error is one line naming ``train.init_from``."""
    import transformers

    from common.errors import ReproError

    where = f"train.init_from={source}"
    folder, identity = _resolve(source, where)
    try:
        config = transformers.AutoConfig.from_pretrained(folder)
    except Exception as e:  # noqa: BLE001
        raise ReproError(f"{where}: no readable config.json ({str(e).splitlines()[0]}); "
                         "give a LlamaForCausalLM folder") from None
    if config.model_type != "llama":
        raise ReproError(f"{where}: a {config.model_type} checkpoint, not a Llama one; give a LlamaForCausalLM")
    try:
        problem = shape_problem(model, config) or layer_problem(model, config)
    except ValueError as e:
        problem = str(e)
    if problem:
        raise ReproError(f"{where}: {problem}")
    try:
        hf_model = transformers.LlamaForCausalLM.from_pretrained(folder, dtype="auto")
    except Exception as e:  # noqa: BLE001 - a truncated or corrupted weight file
        raise ReproError(f"{where}: cannot read its weights ({str(e).splitlines()[0]}); download them again") from None
    _copy_into(model, hf_model)
    return identity


def layer_problem(model: TokenLM, hf_config) -> str | None:
    """Why ``model``'s depth cannot start from the checkpoint's (None when it can)."""
    theirs, ours = hf_config.num_hidden_layers, model.cfg.n_layer
    if ours < theirs:
        return f"model.n_layer is {ours}, below the checkpoint's {theirs} layers; set it to {theirs} (or more, for PM)"
    if isinstance(model, ConceptLM) and ours != theirs:
        return f"model.n_layer={ours}: ConceptLM keeps the checkpoint's {theirs} token layers"
    if ours - theirs > theirs:
        return f"model.n_layer is {ours}: PM adds at most the checkpoint's {theirs} layers"
    if isinstance(model, ConceptLM) and model.cfg.concept_layers > theirs:
        return (f"model.concept_layers={model.cfg.concept_layers} exceeds the {theirs} backbone layers to "
                "initialise them from")
    return None
