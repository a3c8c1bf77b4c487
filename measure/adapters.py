"""Random LoRA adapters in peft's layout for a base model's architecture: the cost of serving an adapter is in its
shapes, so random weights (fixed seed) give true speed and memory, never true outputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from measure.models import TextDims

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


def adapter_shapes(config: dict) -> dict[str, tuple[int, int]]:
    """(in, out) features of each attention projection an adapter targets, from the base model's config."""
    d = TextDims.of(config)
    return {"q_proj": (d.hidden, d.heads * d.head_dim), "k_proj": (d.hidden, d.kv_heads * d.head_dim),
            "v_proj": (d.hidden, d.kv_heads * d.head_dim), "o_proj": (d.heads * d.head_dim, d.hidden)}


def make_adapter(base_path: str, rank: int, dest: Path, seed: int) -> Path:
    """A LoRA adapter with random (non-zero) weights in peft's layout, for the base model's architecture.

    The tensors are drawn directly from the config's shapes: building the base model to let peft wrap it
    costs minutes per adapter at full size. peft writes the adapter_config.json.
    """
    stamp = f"random tensors from config shapes, recipe 2, rank {rank}, seed {seed}"  # bump when this changes
    marker = dest / ".made-by"
    if marker.is_file() and marker.read_text() == stamp:
        return dest
    shutil.rmtree(dest, ignore_errors=True)  # an adapter made by an older recipe
    import torch
    from peft import LoraConfig
    from safetensors.torch import save_file

    config = json.loads((Path(base_path) / "config.json").read_text())
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(TextDims.of(config).layers):
        for name, (fan_in, fan_out) in adapter_shapes(config).items():
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{name}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(rank, fan_in, generator=generator) / fan_in**0.5
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(fan_out, rank, generator=generator) / rank**0.5
    dest.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(dest / "adapter_model.safetensors"))
    LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=list(TARGETS), base_model_name_or_path=base_path,
               task_type="CAUSAL_LM").save_pretrained(str(dest))
    marker.write_text(stamp)
    return dest
