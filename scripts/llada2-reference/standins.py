"""Run-time stand-ins for the `transformers` plumbing that the official LLaDA2
code (ZHZisZZ/dllm, dllm/pipelines/llada2{,1}) imports, so that its modeling
and sampler files run unmodified on torch 1.13 without transformers.

Only plumbing is stood in. The math of the model (RMSNorm, RoPE application,
attention, the router, the MoE, the MLPs) and of the samplers stays in the
official files. Three stand-ins touch numbers, each documented:

* ACT2FN["silu"] is a torch.nn.SiLU() (what transformers' ACT2FN maps "silu" to).
* ROPE_INIT_FUNCTIONS["default"] computes inv_freq with transformers'
  `_compute_default_rope_parameters` formula (one line, below), attention
  scaling 1.0.
* ALL_ATTENTION_FUNCTIONS["sdpa"] calls the modeling file's own
  `eager_attention_forward` (torch 1.13 has no scaled_dot_product_attention).
  With a 4-D float mask both add the mask to the scaled scores and take a
  softmax, so the math is the same; the mask slicing and GQA repeat are the
  modeling file's.

Everything is registered in sys.modules by `install()`; the official package
folders are mapped as namespace-like stub packages (their __init__.py files,
which pull in the whole dllm package and transformers' Auto* registries,
are not executed), then the official modules are imported from their files.
"""
import importlib
import logging as _logging
import os
import sys
import types
from collections import OrderedDict

import torch
from torch import nn


def _module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


# ---------------------------------------------------------------- config
class PretrainedConfig:
    """The attributes the official code reads from transformers' base config."""

    def __init__(self, pad_token_id=None, bos_token_id=None, eos_token_id=None,
                 tie_word_embeddings=True, **kwargs):
        self.pad_token_id = pad_token_id
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        self.tie_word_embeddings = tie_word_embeddings
        self.output_attentions = kwargs.pop("output_attentions", False)
        self.output_hidden_states = kwargs.pop("output_hidden_states", False)
        self.return_dict = kwargs.pop("return_dict", True)
        self._attn_implementation = kwargs.pop("attn_implementation", "sdpa")
        for k, v in kwargs.items():
            setattr(self, k, v)

    @property
    def use_return_dict(self):
        return self.return_dict


# ---------------------------------------------------------------- outputs
class ModelOutput(OrderedDict):
    """Attribute and index access over the non-None fields, in field order."""

    _fields = ()

    def __init__(self, **kwargs):
        super().__init__()
        for f in self._fields:
            v = kwargs.pop(f, None)
            object.__setattr__(self, f, v)
            if v is not None:
                OrderedDict.__setitem__(self, f, v)
        assert not kwargs, kwargs

    def to_tuple(self):
        return tuple(self.values())

    def __getitem__(self, k):
        if isinstance(k, str):
            return OrderedDict.__getitem__(self, k)
        return self.to_tuple()[k]


class MoeModelOutputWithPast(ModelOutput):
    _fields = ("last_hidden_state", "past_key_values", "hidden_states", "attentions", "router_logits")


class MoeCausalLMOutputWithPast(ModelOutput):
    _fields = ("loss", "aux_loss", "logits", "past_key_values", "hidden_states", "attentions",
               "router_logits")


# ---------------------------------------------------------------- cache
class Cache:
    pass


class DynamicCache(Cache):
    """The samplers never reuse a cache: the model makes a fresh one per call
    (config.use_cache), for which transformers' DynamicCache.update returns
    the current keys and values unchanged. So does this one."""

    def get_seq_length(self, layer_idx=0):
        return 0

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        return key_states, value_states


# ---------------------------------------------------------------- masks
def _prepare_4d_causal_attention_mask_for_sdpa(attention_mask, input_shape, inputs_embeds,
                                               past_key_values_length, sliding_window=None):
    # transformers returns None (no mask: full attention here, as the
    # attention module is not causal) for no mask and q_len == kv_len. Every
    # call in this harness passes a 4-D mask, which never reaches this.
    if attention_mask is None and past_key_values_length == 0:
        return None
    raise NotImplementedError("stand-in: only the no-mask case is supported")


def _prepare_4d_causal_attention_mask(*args, **kwargs):
    raise NotImplementedError("stand-in: the eager mask path is not used (config is sdpa)")


# ---------------------------------------------------------------- rope
def _compute_default_rope_parameters(config, device=None, seq_len=None):
    base = config.rope_theta
    partial_rotary_factor = getattr(config, "partial_rotary_factor", 1.0)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dim = int(head_dim * partial_rotary_factor)
    attention_factor = 1.0
    # transformers' formula (modeling_rope_utils._compute_default_rope_parameters):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim))
    return inv_freq, attention_factor


def dynamic_rope_update(fn):
    return fn  # a no-op for rope_type "default"


# ---------------------------------------------------------------- attention
def _sdpa_standin(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                  is_causal=None, **kwargs):
    """Stand-in for transformers' sdpa_attention_forward: the official
    modeling file's own eager_attention_forward (scores * scaling + mask,
    fp32 softmax, @ V; returns [B, S, H, D] like sdpa)."""
    official = sys.modules[type(module).__module__]
    return official.eager_attention_forward(module, query, key, value, attention_mask,
                                            scaling=scaling, dropout=dropout)


# ---------------------------------------------------------------- model base
class PreTrainedModel(nn.Module):
    config_class = None
    base_model_prefix = ""

    def __init__(self, config, *args, **kwargs):
        super().__init__()
        self.config = config

    def post_init(self):
        pass  # weights are loaded from the GGUF right after construction

    @property
    def device(self):
        return next(self.parameters()).device

    @property
    def dtype(self):
        return next(self.parameters()).dtype


class GenerationMixin:
    pass


class PreTrainedTokenizer:
    pass


class _ACT2FN(dict):
    """Like transformers' ClassInstantier: ACT2FN[name] is a new module."""

    def __getitem__(self, key):
        return dict.__getitem__(self, key)()


class Unpack:
    """typing.Unpack stand-in (annotations only)."""

    def __class_getitem__(cls, item):
        return cls


class _Logger(_logging.LoggerAdapter):
    _seen = set()

    def warning_once(self, msg, *a, **k):
        if msg not in self._seen:
            self._seen.add(msg)
            self.warning(msg, *a, **k)


def _get_logger(name=None):
    return _Logger(_logging.getLogger(name), {})


def _docstring_decorator(*args, **kwargs):
    return lambda f: f


class _Registry:
    @staticmethod
    def register(*args, **kwargs):
        pass


def install():
    """Registers the fake `transformers` package in sys.modules."""
    if "transformers" in sys.modules and getattr(sys.modules["transformers"], "_llada2_standin", False):
        return
    tf = _module("transformers", _llada2_standin=True, __path__=[],
                 PreTrainedModel=PreTrainedModel, PreTrainedTokenizer=PreTrainedTokenizer,
                 PretrainedConfig=PretrainedConfig, AutoConfig=_Registry, AutoModel=_Registry,
                 AutoModelForMaskedLM=_Registry)
    _module("transformers.configuration_utils", PretrainedConfig=PretrainedConfig)
    _module("transformers.activations", ACT2FN=_ACT2FN(silu=nn.SiLU))
    _module("transformers.cache_utils", Cache=Cache, DynamicCache=DynamicCache)
    _module("transformers.modeling_attn_mask_utils",
            _prepare_4d_causal_attention_mask=_prepare_4d_causal_attention_mask,
            _prepare_4d_causal_attention_mask_for_sdpa=_prepare_4d_causal_attention_mask_for_sdpa)
    _module("transformers.modeling_outputs", MoeModelOutputWithPast=MoeModelOutputWithPast,
            MoeCausalLMOutputWithPast=MoeCausalLMOutputWithPast)
    _module("transformers.modeling_rope_utils",
            ROPE_INIT_FUNCTIONS={"default": _compute_default_rope_parameters},
            dynamic_rope_update=dynamic_rope_update)
    _module("transformers.modeling_utils", ALL_ATTENTION_FUNCTIONS={"sdpa": _sdpa_standin},
            PreTrainedModel=PreTrainedModel)
    _module("transformers.processing_utils", Unpack=Unpack)
    _module("transformers.pytorch_utils", ALL_LAYERNORM_LAYERS=[],
            is_torch_greater_or_equal_than_1_13=True)
    utils = _module("transformers.utils", __path__=[], TransformersKwargs=dict,
                    add_start_docstrings=_docstring_decorator,
                    add_start_docstrings_to_model_forward=_docstring_decorator,
                    replace_return_docstrings=_docstring_decorator,
                    logging=types.SimpleNamespace(get_logger=_get_logger))
    # is_torch_fx_available() False: skips torch.fx.wrap of the eager mask helper
    # (a tracing annotation only).
    utils.import_utils = _module("transformers.utils.import_utils", is_torch_fx_available=lambda: False)
    gen = _module("transformers.generation", __path__=[])
    gen.utils = _module("transformers.generation.utils", GenerationMixin=GenerationMixin)
    tf.utils, tf.generation = utils, gen


def _stub_package(name, path):
    if name in sys.modules:
        return sys.modules[name]
    m = types.ModuleType(name)
    m.__path__ = [path]
    m.__package__ = name
    sys.modules[name] = m
    return m


def load_official(zhz_dllm):
    """Imports the official LLaDA2.0 / 2.1 modeling, configuration and sampler
    modules from a ZHZisZZ/dllm checkout, unmodified. Returns a namespace."""
    install()
    root = os.path.join(os.path.abspath(zhz_dllm), "dllm")
    if not os.path.isfile(os.path.join(root, "pipelines", "llada2", "sampler.py")):
        raise SystemExit(f"{zhz_dllm}: not a ZHZisZZ/dllm checkout")
    _stub_package("dllm", root)
    _stub_package("dllm.core", os.path.join(root, "core"))
    _stub_package("dllm.core.samplers", os.path.join(root, "core", "samplers"))
    _stub_package("dllm.pipelines", os.path.join(root, "pipelines"))
    for p in ("llada2", "llada21"):
        _stub_package(f"dllm.pipelines.{p}", os.path.join(root, "pipelines", p))
        _stub_package(f"dllm.pipelines.{p}.models", os.path.join(root, "pipelines", p, "models"))
    imp = importlib.import_module
    return types.SimpleNamespace(
        config2=imp("dllm.pipelines.llada2.models.configuration_llada2_moe"),
        model2=imp("dllm.pipelines.llada2.models.modeling_llada2_moe"),
        sampler2=imp("dllm.pipelines.llada2.sampler"),
        config21=imp("dllm.pipelines.llada21.models.configuration_llada21_moe"),
        model21=imp("dllm.pipelines.llada21.models.modeling_llada21_moe"),
        sampler21=imp("dllm.pipelines.llada21.sampler"),
    )
