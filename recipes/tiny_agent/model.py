"""The CPU-sized tiny agent: a real Qwen2.5-Omni thinker, sized so agentic SFT takes minutes on 2 cores.

Why these sizes (measured on the synthetic benchmark's per-turn SFT samples, 2 cores, see README):

- **Text is the bottleneck, not media.** With the random tiny model's 640-symbol tokenizer a sample
  is ~2.5 K tokens, of which the system prompt alone is ~850; a frame is 16 tokens (its processor
  caps frames at 16 patches of 28 px) and audio 25 tokens/s (capped at 30 s per span). So the
  agent's byte-level BPE is trained on the environment's own prompts and the teacher's replies
  (``--corpus``: the exported parquet) with a 2048-symbol vocabulary, which makes its contexts
  several times shorter for every prompt the environment writes.
- **Text 128 wide x 4 layers** (1.4 M parameters with the encoders): ~0.2 s per AdamW step on a
  1.5 K-token sample (``../shared/notes/qwen-omni.md``), so a few thousand samples train in minutes.
  The vision (32 x 2) and audio (32 x 2) encoders are the random tiny model's and train with it.

    python -m recipes.tiny_agent.model --corpus runs/tiny_agent/train.parquet --out runs/tiny_agent/init
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

AGENT_VOCAB = 2048


class AgentSize(BaseModel):
    """Widths of the tiny agent's thinker (the text model; the encoders are the tiny model's)."""

    model_config = ConfigDict(extra="forbid")

    hidden_size: int = Field(128, description="text model width")
    num_hidden_layers: int = Field(4, description="text model layers")
    num_attention_heads: int = Field(4, description="query heads (head_dim = hidden_size / heads)")
    num_key_value_heads: int = Field(2, description="key/value heads")
    intermediate_size: int = Field(256, description="MLP width")
    vocab_size: int = Field(AGENT_VOCAB, description="BPE symbols trained on the corpus")
    vision_hidden_size: int = Field(32, description="vision encoder width (heads of 32; MLP twice as wide)")
    vision_depth: int = Field(2, description="vision encoder layers (the last attends the whole frame)")


def mrope_section(head_dim: int) -> list[int]:
    """TMRoPE's (t, h, w) split of half the head dimension, in the 16:24:24 ratio Qwen2.5-Omni uses."""
    half = head_dim // 2
    t = half // 4
    h = (half - t) // 2
    return [t, h, half - t - h]


def corpus_texts(parquet_files: Iterable[str | Path]) -> list[str]:
    """Every text the agent reads or writes in exported SFT rows (prompts, stubs, teacher outputs)."""
    import pyarrow.parquet as pq

    texts: list[str] = []
    for path in parquet_files:
        for raw in pq.read_table(str(path), columns=["messages"]).column("messages").to_pylist():
            for message in json.loads(raw):
                content = message.get("content")
                if isinstance(content, str):
                    texts.append(content)
                    continue
                texts.extend(p["text"] for p in content or [] if p.get("type") == "text" and p.get("text"))
    return sorted(set(texts))  # sorted: the same corpus, hence the same merges, whatever the row order


def agent_thinker_config(tokenizer: Any, seed: int, size: AgentSize) -> Any:
    """The Qwen2.5-Omni thinker config of the tiny agent of ``size``: token ids, encoders and generation
    defaults from :func:`omniagent.tiny_model.build_model` for ``tokenizer`` and ``seed``, with the text
    model (and, when ``size`` asks, the vision tower) resized."""
    from transformers import Qwen2_5OmniThinkerConfig

    from omniagent.tiny_model import build_model

    base = build_model(tokenizer, seed).config.to_dict()  # token ids, encoders, generation defaults
    text = dict(base["text_config"])
    text.pop("layer_types", None)  # must match the layer count; rebuilt from it
    head_dim = size.hidden_size // size.num_attention_heads
    text.update(
        hidden_size=size.hidden_size,
        num_hidden_layers=size.num_hidden_layers,
        num_attention_heads=size.num_attention_heads,
        num_key_value_heads=size.num_key_value_heads,
        intermediate_size=size.intermediate_size,
        vocab_size=len(tokenizer),
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": mrope_section(head_dim)},
    )
    base["text_config"] = text
    base["audio_config"]["output_dim"] = size.hidden_size
    vision = base["vision_config"]
    vision["out_hidden_size"] = size.hidden_size
    if (size.vision_hidden_size, size.vision_depth) != (vision["hidden_size"], vision["depth"]):
        vision.update(
            hidden_size=size.vision_hidden_size,
            intermediate_size=2 * size.vision_hidden_size,
            num_heads=max(2, size.vision_hidden_size // 32),
            depth=size.vision_depth,
            fullatt_block_indexes=[size.vision_depth - 1],
        )
    base["initializer_range"] = 0.02  # a model to train, not a noise generator with peaked outputs
    for key in ("model_type", "transformers_version", "architectures"):
        base.pop(key, None)
    return Qwen2_5OmniThinkerConfig(**base)


def build_agent_thinker(
    out_dir: str | Path,
    corpus: Sequence[str],
    seed: int = 0,
    size: AgentSize | None = None,
    added_tokens: Sequence[str] = (),
) -> Path:
    """Build the untrained agent (tokenizer trained on ``corpus``, then ``added_tokens`` added whole) and save a
    complete folder."""
    import torch
    from transformers import GenerationConfig, Qwen2_5OmniThinkerForConditionalGeneration

    from omniagent.tiny_model import TOKENIZER_CORPUS, build_processor, train_tokenizer
    from rl.checkpoint import save_checkpoint

    size = size or AgentSize()
    tokenizer = train_tokenizer(list(TOKENIZER_CORPUS) + list(corpus), vocab_size=size.vocab_size)
    if added_tokens:
        tokenizer.add_tokens(list(added_tokens))
    processor = build_processor(tokenizer)
    config = agent_thinker_config(tokenizer, seed, size)
    torch.manual_seed(seed)
    model = Qwen2_5OmniThinkerForConditionalGeneration(config).eval()
    end, pad = tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")
    model.generation_config = GenerationConfig(eos_token_id=[end, pad], pad_token_id=pad, do_sample=False)
    return save_checkpoint(model, processor, out_dir)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m recipes.tiny_agent.model", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--corpus", nargs="+", required=True, help="exported SFT parquet file(s)")
    parser.add_argument("--out", required=True, help="folder for the untrained agent")
    parser.add_argument("--seed", type=int, default=0)
    for name, field in AgentSize.model_fields.items():
        parser.add_argument(
            f"--{name.replace('_', '-')}", type=int, default=field.default, help=field.description
        )
    args = parser.parse_args(argv)
    size = AgentSize(**{k: getattr(args, k) for k in AgentSize.model_fields})
    out = build_agent_thinker(args.out, corpus_texts(args.corpus), seed=args.seed, size=size)
    print(json.dumps({"out": str(out), **size.model_dump()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
