"""``OmniTurnSFTDataset``: per-turn SFT samples (parquet from :mod:`rl.sft.export`) as omni thinker inputs.

The model family (Qwen2.5-Omni, Qwen3-Omni; :mod:`omniagent.families`) comes from the checkpoint's
``config.json``: its processor, its rope-index class and its reasoning-block format are the family's.

verl's SFT trainer loads it through ``data.custom_cls.path=pkg://rl.sft.dataset`` and
``data.custom_cls.name=OmniTurnSFTDataset``, and calls (verl 0.9.1,
``verl/trainer/sft_trainer.py::create_sft_dataset``)::

    OmniTurnSFTDataset(parquet_files=..., tokenizer=..., config=config.data, processor=..., max_samples=...)

Each item is one turn: the context the environment showed (earlier percepts as text stubs, the
latest one as real media) followed by the assistant's output for that turn. The media go through
:func:`omniagent.backends.convert.build_model_inputs` (the same conversion the policies use), so
training and inference see identical token sequences. The context is rendered by the chat template
with its generation prompt, and the target is appended as the model writes it (a thinking teacher's
reasoning block first, when the message carries one). The loss covers the target only: its tokens plus
the closing ``<|im_end|>`` (not the ``<|im_start|>assistant\\n`` header, not the newline after
``<|im_end|>``).

Item format (verl's ``no_padding`` mode, like ``MultiTurnSFTDataset``):

- ``input_ids`` (L,), ``loss_mask`` (L,) and ``position_ids`` (4, L): row 0 the plain text positions,
  rows 1-3 the multimodal rope indices (TMRoPE) from the thinker's own ``get_rope_index``
  (audio-in-video interleaving included). The thinker's text model reads a 4-row ``position_ids`` as
  (text, t, h, w), which is also verl's convention for the Qwen-VL family;
- ``multi_modal_inputs``: the processor's tensors (``pixel_values``, ``image_grid_thw``,
  ``pixel_values_videos``, ``video_grid_thw``, ``video_second_per_grid``, ``input_features``,
  ``feature_attention_mask``) for the model's forward.

With ``pad_mode: right`` the sequence is padded to ``max_length`` and ``attention_mask`` is added.

Settings read from ``config`` (verl's ``data`` section): ``pad_mode``, ``max_length``, ``truncation``
(only ``error``: a context cannot be cut without breaking its media), and ``omni``:
``processor_path`` / ``model_path`` (default: the tokenizer's path; verl cannot build the Omni
processor itself, so it passes ``processor=None``), ``image_pixels`` / ``video_pixels``
(``[min, max]`` pixels per image / frame, default the checkpoint's), ``allow_audio_in_video``,
``keep_thinking`` (default true: a target's reasoning block is trained on), ``answer_weight`` (default 1: an
answer action's tokens weigh this much in the loss; with any other value an item also carries ``loss_weight`` (L,),
float, :mod:`rl.sft.weights`), ``row_group_cache`` (default 2: decoded row groups kept; the rows are read on demand,
one row group at a time, so memory does not grow with the data: :mod:`rl.sft.rows`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from envs.messages import message_text
from omniagent.backends.convert import build_model_inputs, model_video_kwargs
from omniagent.checkpoint import checkpoint_family
from omniagent.families import Thinking, family_for_model_type
from rl.sft.export import row_messages
from rl.sft.rows import CACHE_GROUPS, ParquetRows
from rl.sft.weights import check_weight, reply_weights

END_OF_TURN = "<|im_end|>"
# Keys of a processor batch that are not media tensors (the rest feed the rope index and the model).
NON_MEDIA_KEYS = ("input_ids", "attention_mask", "use_audio_in_video", "mm_token_type_ids")


def _get(config: Any, key: str, default: Any = None) -> Any:
    if config is None:
        return default
    if hasattr(config, "get"):
        value = config.get(key, default)
    else:
        value = getattr(config, key, default)
    return default if value is None else value


class RopeIndexer:
    """The thinker's ``get_rope_index`` without a model: only the thinker config is needed.

    The methods are borrowed from the class the config's family names
    (:meth:`~omniagent.families.spec.ModelFamily.rope_index_class`): Qwen2.5-Omni's TMRoPE, or Qwen3-Omni's
    positions with its interleaved audio in video; both take the same arguments.
    """

    def __init__(self, thinker_config: Any) -> None:
        self.config = thinker_config
        self.family = family_for_model_type(getattr(thinker_config, "model_type", None))
        self.spatial_merge_size = thinker_config.vision_config.spatial_merge_size
        base = self.family.rope_index_class()
        self._fns = {
            n: getattr(base, n) for n in ("get_rope_index", "get_llm_pos_ids_for_vision", "get_chunked_index")
        }

    def __getattr__(self, name: str) -> Any:  # the borrowed methods call each other through self
        fns = self.__dict__.get("_fns", {})
        if name in fns:
            return fns[name].__get__(self)
        raise AttributeError(name)

    @classmethod
    def from_pretrained(cls, path: str) -> RopeIndexer:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(path)
        config = getattr(config, "thinker_config", config)  # full Omni checkpoint -> its thinker
        return cls(config)

    def __call__(self, input_ids: torch.Tensor, mm: dict[str, Any], use_audio_in_video: bool) -> torch.Tensor:
        """(3, L) multimodal rope positions of one unpadded sequence."""
        fam = mm.get("feature_attention_mask")
        positions, _ = self._fns["get_rope_index"](
            self,
            input_ids[None],
            mm.get("image_grid_thw"),
            mm.get("video_grid_thw"),
            torch.ones_like(input_ids)[None],
            use_audio_in_video,
            fam.sum(-1) if fam is not None else None,
            mm.get("video_second_per_grid"),
        )
        return positions[:, 0, :].long()


def load_processor(path: str) -> Any:
    """The processor of the checkpoint at ``path``, by its family (``config.json``'s ``model_type``)."""
    return checkpoint_family(path).transformers_class("processor").from_pretrained(path)


def assistant_completion(message: dict[str, Any], thinking: Thinking | None) -> str:
    """What the model writes for an assistant ``message`` after the generation prompt, closing
    ``<|im_end|>`` and the template's newline included: its text, with its reasoning block first when the
    message carries one (``thinking`` key, a thinking teacher's) and the family has a thinking format."""
    content = message["content"]
    text = content if isinstance(content, str) else "".join(p["text"] for p in content if p["type"] == "text")
    reasoning = message.get("thinking")
    if reasoning and thinking is not None:
        text = thinking.join(reasoning, text)
    return f"{text}{END_OF_TURN}\n"


class OmniTurnSFTDataset(Dataset):
    """One item per (trajectory, turn); loss on the final assistant message only (see module docs)."""

    def __init__(
        self,
        parquet_files: str | list[str],
        tokenizer: Any,
        config: Any = None,
        processor: Any = None,
        max_samples: int = -1,
    ) -> None:
        self.config = config
        self.pad_mode = str(_get(config, "pad_mode", "no_padding"))
        if self.pad_mode not in ("no_padding", "right"):
            raise ValueError(f"pad_mode must be 'no_padding' or 'right', got {self.pad_mode!r}")
        self.max_length = int(_get(config, "max_length", 65536))
        self.truncation = str(_get(config, "truncation", "error"))
        if self.truncation != "error":
            raise ValueError(
                "OmniTurnSFTDataset supports truncation='error' only (cutting a context breaks its media)"
            )
        omni = _get(config, "omni", {}) or {}
        if isinstance(tokenizer, str):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        source = _get(omni, "processor_path") or getattr(tokenizer, "name_or_path", None)
        if processor is None:
            if not source:
                raise ValueError(
                    "no processor given and no data.omni.processor_path / tokenizer path to load it from"
                )
            processor = load_processor(source)
        self.processor = processor
        self.tokenizer = tokenizer if tokenizer is not None else processor.tokenizer
        model_path = _get(omni, "model_path") or source or getattr(processor, "name_or_path", None)
        if not model_path:
            raise ValueError("set data.omni.model_path: the thinker config is needed for the RoPE positions")
        self.rope = RopeIndexer.from_pretrained(str(model_path))
        pix = _get(omni, "image_pixels")
        vpix = _get(omni, "video_pixels")
        self.image_pixels = tuple(int(x) for x in pix) if pix else None
        self.video_pixels = tuple(int(x) for x in vpix) if vpix else None
        self.allow_audio_in_video = bool(_get(omni, "allow_audio_in_video", True))
        self.keep_thinking = bool(_get(omni, "keep_thinking", True))
        weight = _get(omni, "answer_weight")
        self.answer_weight = 1.0 if weight is None else check_weight(weight)
        self.end_id = self.tokenizer.convert_tokens_to_ids(END_OF_TURN)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

        rows = ParquetRows(parquet_files, int(_get(omni, "row_group_cache", CACHE_GROUPS)))
        total = len(rows)
        if max_samples is not None and 0 < int(max_samples) < total:
            if bool(_get(config, "shuffle", False)):
                seed = _get(config, "seed")
                rows = rows.select(
                    np.sort(np.random.default_rng(seed).choice(total, size=int(max_samples), replace=False))
                )
            else:
                rows = rows.select(np.arange(int(max_samples)))
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def row(self, index: int) -> dict[str, Any]:
        """Sample ``index``'s parquet row (read with its row group, :class:`rl.sft.rows.ParquetRows`)."""
        return self.rows.row(index)

    def messages(self, index: int) -> list[dict[str, Any]]:
        """The decoded chat of sample ``index``: context + target assistant message."""
        return row_messages(self.row(index))

    keep_thinking = True  # a target's reasoning block is trained on (data.omni.keep_thinking)
    answer_weight = 1.0  # the plain loss (data.omni.answer_weight); a subclass without __init__ keeps it

    def encode(self, messages: list[dict[str, Any]], sample_id: str = "") -> dict[str, Any]:
        """Tokenize a chat whose last message is the assistant target (see module docs).

        The context is rendered by the chat template with its generation prompt; the target is appended
        as the model writes it (:func:`assistant_completion`), since a template may render past assistant
        turns differently (Qwen3-Omni's drops their reasoning)."""
        if not messages or messages[-1]["role"] != "assistant":
            raise ValueError(f"{sample_id}: the last message must be the assistant target")
        thinking = self.rope.family.thinking if self.keep_thinking else None
        completion = assistant_completion(messages[-1], thinking)
        batch, _ = build_model_inputs(
            messages[:-1],
            self.processor,
            image_pixels=self.image_pixels,
            video_pixels=self.video_pixels,
            allow_audio_in_video=self.allow_audio_in_video,
            add_generation_prompt=True,
            video_kwargs=model_video_kwargs(self.processor, self.rope.config),
            completion=completion,
        )
        input_ids = batch["input_ids"][0].long()
        weighted = self.answer_weight != 1.0
        enc = self.tokenizer(completion, add_special_tokens=False, return_offsets_mapping=weighted)
        comp_ids = enc["input_ids"]
        n = len(comp_ids)
        if n == 0 or input_ids[-n:].tolist() != list(comp_ids):
            raise ValueError(f"{sample_id}: the target's tokens are not a suffix of the tokenized chat")
        ends = [i for i, t in enumerate(comp_ids) if t == self.end_id]
        if not ends:
            raise ValueError(f"{sample_id}: no {END_OF_TURN} after the assistant target")
        length = input_ids.shape[0]
        loss_mask = torch.zeros(length, dtype=torch.long)
        start = length - n
        loss_mask[start : start + ends[-1] + 1] = 1
        loss_weight = None
        if weighted:
            reply = message_text(messages[-1])
            weights = reply_weights(enc["offset_mapping"], completion, reply, self.answer_weight)
            loss_weight = loss_mask.to(torch.float32)
            loss_weight[start:] *= torch.tensor(weights, dtype=torch.float32)

        use_aiv = bool(batch.get("use_audio_in_video", False))
        mm = {k: v for k, v in batch.items() if k not in NON_MEDIA_KEYS and isinstance(v, torch.Tensor)}
        rope = self.rope(input_ids, mm, use_aiv)
        position_ids = torch.cat([torch.arange(length, dtype=torch.long)[None], rope], dim=0)  # (4, L)
        if length > self.max_length:
            raise ValueError(f"{sample_id}: {length} tokens > data.max_length={self.max_length}")
        item: dict[str, Any] = {"input_ids": input_ids, "position_ids": position_ids, "loss_mask": loss_mask}
        if loss_weight is not None:
            item["loss_weight"] = loss_weight
        if self.pad_mode == "right":
            pad = self.max_length - length
            item["input_ids"] = torch.cat([input_ids, torch.full((pad,), self.pad_id, dtype=torch.long)])
            item["attention_mask"] = torch.cat(
                [torch.ones(length, dtype=torch.long), torch.zeros(pad, dtype=torch.long)]
            )
            item["loss_mask"] = torch.cat([loss_mask, torch.zeros(pad, dtype=torch.long)])
            if loss_weight is not None:
                item["loss_weight"] = torch.cat([loss_weight, torch.zeros(pad, dtype=torch.float32)])
            item["position_ids"] = torch.nn.functional.pad(position_ids, (0, pad), value=0)
        if mm:
            item["multi_modal_inputs"] = mm
        return item

    def __getitem__(self, index: int) -> dict[str, Any]:
        row = self.row(index)
        return self.encode(row_messages(row), sample_id=str(row.get("id", index)))
