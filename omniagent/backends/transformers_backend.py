"""Run an omni thinker in-process with Hugging Face transformers (every family of :mod:`omniagent.families`).

``TransformersPolicy(model="tiny")`` loads the trained tiny agent shipped in the package
(:mod:`omniagent.tiny_agent`); ``model="tiny-random"`` (Qwen2.5-Omni) or ``"tiny-random-qwen3-omni"``
builds a tiny random thinker of :mod:`omniagent.tiny_model` (offline, outputs are noise: for plumbing
only). Any other ``model`` is a local checkpoint folder or a Hub id already in the local cache; nothing
is downloaded when the machine is offline. The family comes from ``config.json``'s ``model_type``: a
thinker-only checkpoint loads its thinker class, a full one loads with the talker disabled (its speech
weights are skipped) and keeps the thinker.

Every turn decodes under the environment's JSON schema of a well-formed turn by default
(``constrained="auto"``: whenever the episode's reset info carries the schema; ``False`` opts out). A
thinking variant (``Qwen3-Omni-...-Thinking``, or ``thinking=True``) writes a reasoning block first:
it is cut off before the environment parses the turn and recorded as the turn's ``thinking``.

Per-token log-probs and entropies are computed from the raw ``output_logits`` of ``generate``
(the model's untempered next-token distribution, ``softmax(logits)``), not from the post-processed
``scores``, which carry temperature, top-p and masks such as ``min_new_tokens``' EOS ban.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from envs.messages import Message
from omniagent.backends.constrained import ConstraintUnavailable, TurnGrammar
from omniagent.backends.convert import build_model_inputs, model_video_kwargs
from omniagent.families import (
    FAMILIES,
    ModelFamily,
    UnknownFamilyError,
    family_for_alias,
    family_for_model_type,
)
from omniagent.policy_base import (
    Policy,
    PolicyConfigError,
    PolicyError,
    PolicyParams,
    TurnOutput,
    register_policy,
)

logger = logging.getLogger(__name__)

TINY = "tiny-random"  # the random tiny Qwen2.5-Omni thinker (plumbing tests); each family has its alias
TINY_AGENT = "tiny"  # the trained tiny agent shipped in omniagent/assets/tiny_agent
MEDIA_INPUTS = ("pixel_values", "pixel_values_videos", "input_features")  # the processor's media tensors
TINY_TEXT_CHARS = 64  # a random model's constrained strings close within the token budget
_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16"}
_DTYPES |= {"float16": "float16", "fp16": "float16", "half": "float16"}


def token_stats_from_logits(logits: Any, token_ids: Any) -> tuple[Any, Any]:
    """Log-prob of each chosen token and the entropy (nats) of each step's distribution.

    ``logits``: ``(steps, vocab)`` raw logits; ``token_ids``: ``(steps,)``. Masked entries (``-inf``)
    contribute zero entropy. Computed in float32 whatever the model dtype.
    """
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    chosen = logp.gather(-1, token_ids.long().view(-1, 1)).squeeze(-1)
    p = logp.exp()
    entropy = -torch.where(p > 0, p * logp, torch.zeros_like(p)).sum(-1)
    return chosen, entropy


def _import_transformers() -> None:
    """Import every transformers class this backend uses, now, in the constructing thread.

    transformers resolves ``from transformers import X`` lazily; two eval worker threads doing it
    for the first time at once raced into ``ImportError: cannot import name
    'Qwen2_5OmniProcessor'``. Once imported, later imports are plain module-dict look-ups.
    """
    import transformers

    names = ["AutoConfig", "GenerationConfig", "Qwen2Tokenizer"]
    names += [getattr(f.classes, w) for f in FAMILIES.values() for w in ("thinker", "full", "thinker_config")]
    names += [f.classes.processor for f in FAMILIES.values()]
    for name in names:  # one module object, as `from transformers import ...` would use
        getattr(transformers, name)


def _resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device={device!r} requested but torch sees no CUDA device; use device='cpu'")
    return device


def _resolve_dtype(dtype: str, device: str) -> Any:
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be 'auto' or one of {sorted(_DTYPES)}, got {dtype!r}")
    return getattr(torch, _DTYPES[dtype])


def _checkpoint_family(model: str) -> tuple[ModelFamily, str]:
    """The family and ``model_type`` of a local folder or a Hub id in the local cache (no weights read)."""
    from transformers import AutoConfig

    from omniagent.checkpoint import check_checkpoint

    hint = (
        "Use `--model tiny` for the shipped tiny agent (`tiny-random`: random weights), point `--model` "
        "at a downloaded checkpoint folder, or serve the model elsewhere and use "
        "`--backend openai --base-url http://HOST:PORT/v1`."
    )
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise OSError(f"{model!r} is a folder without a config.json, not a checkpoint. {hint}")
        check_checkpoint(path)  # names every missing processor/tokenizer/template file, and the family
    elif model.startswith((".", "/", "~")) or model.count("/") > 1:  # a path, not a Hub id
        raise OSError(f"no checkpoint folder at {model!r}. {hint}")
    try:
        config = AutoConfig.from_pretrained(model)
    except (OSError, ValueError) as err:
        raise OSError(
            f"cannot load model {model!r}: not a local checkpoint folder and not available offline "
            f"({type(err).__name__}: {err}). {hint}"
        ) from err
    try:
        family = family_for_model_type(getattr(config, "model_type", None))
    except UnknownFamilyError as err:
        raise ValueError(
            f"model {model!r}: {err}. Serve other models with vLLM and use `--backend openai --base-url ...`."
        ) from None
    return family, config.model_type


def _load_family_thinker(family: ModelFamily, model: str, model_type: str, dtype: Any) -> Any:
    """The thinker of a thinker-only or a full checkpoint (the talker is never built: its weights are skipped)."""
    if model_type == family.thinker_model_type:
        return family.transformers_class("thinker").from_pretrained(model, dtype=dtype)
    full = family.transformers_class("full").from_pretrained(model, dtype=dtype, enable_audio_output=False)
    net = full.thinker
    if getattr(net, "generation_config", None) is not None and full.generation_config is not None:
        net.generation_config = copy.deepcopy(full.generation_config)
    return net


class TransformersParams(PolicyParams):
    """Parameters of :class:`TransformersPolicy`."""

    model: str = Field(
        TINY,
        description='"tiny" (the shipped trained tiny agent), "tiny-random" / "tiny-random-qwen3-omni" (random '
        "test models), a local checkpoint folder, or a Hub id in the local cache",
    )
    device: str = Field("auto", description='"auto" (CUDA when available), "cpu", "cuda" or "cuda:N"')
    dtype: str = Field(
        "auto", description='"auto" (bfloat16 on CUDA, float32 on CPU), float32, bfloat16, float16'
    )
    max_new_tokens: int = Field(256, ge=1, description="cap on generated tokens per turn")
    temperature: float = Field(0.0, ge=0, description="0 decodes greedily; > 0 samples")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus mass when sampling")
    seed: int = Field(
        0, description="seeds torch's generator once at construction (and the tiny model's weights)"
    )
    image_pixels: tuple[int, int] | None = Field(
        None, description="(min_pixels, max_pixels) per image; default: the checkpoint's processor settings"
    )
    video_pixels: tuple[int, int] | None = Field(
        None,
        description="(min_pixels, max_pixels) per video frame; default: the checkpoint's processor settings",
    )
    use_audio_in_video: bool = Field(
        True, description="interleave a clip's own audio with its frames (TMRoPE)"
    )
    tiny_dir: str | None = Field(
        None, description="cache folder for a tiny random model (default: a temp cache per family and seed)"
    )
    constrained: bool | Literal["auto"] = Field(
        "auto",
        description="decode every turn under the environment's JSON schema of a well-formed turn (xgrammar; "
        'the last turn of the budget may only answer): "auto" whenever the reset info carries the schema, '
        "true always (an episode without one is an error), false never",
    )
    thinking: bool | None = Field(
        None,
        description="the model writes a reasoning block before each turn (a thinking variant); default: "
        "from the checkpoint name (e.g. Qwen3-Omni-30B-A3B-Thinking)",
    )
    max_thinking_chars: int | None = Field(
        None, ge=0, description="cap on a reasoning block under constrained decoding (default: none)"
    )
    max_text_chars: int | None = Field(
        None,
        ge=1,
        description="cap on the observation and thought strings under constrained decoding (default: none; "
        f"{TINY_TEXT_CHARS} for the tiny random models, whose strings would otherwise run to the token cap)",
    )


@register_policy("transformers")
class TransformersPolicy(Policy):
    """An omni thinker run with ``transformers.generate``; parameters in :class:`TransformersParams`.

    Thread safety: every transformers class is imported at construction (transformers' lazy imports
    race when two threads first touch them), and :meth:`act` holds a per-policy lock, so one policy
    may be shared by several eval workers (they take turns on the model).
    """

    name = "transformers"
    Params = TransformersParams

    def __init__(self, **kwargs: Any) -> None:
        p: TransformersParams = self._init_params(kwargs)
        import torch

        _import_transformers()
        self._lock = threading.Lock()
        self.model_id = p.model
        self.device = _resolve_device(p.device)
        self.dtype = _resolve_dtype(p.dtype, self.device)
        self.max_new_tokens, self.temperature, self.top_p = p.max_new_tokens, p.temperature, p.top_p
        self.seed = p.seed
        self.image_pixels, self.video_pixels = p.image_pixels, p.video_pixels
        self.use_audio_in_video = p.use_audio_in_video

        net, self.processor = self._load(p)
        self.model = net.to(device=self.device, dtype=self.dtype).eval()
        self.video_kwargs = model_video_kwargs(self.processor, self.model.config)
        self.generation_config = self._generation_config()
        self.constrained, self.max_thinking_chars = p.constrained, p.max_thinking_chars
        if p.max_text_chars is None and family_for_alias(p.model) is not None:  # record what is used
            p = self.params = p.model_copy(update={"max_text_chars": TINY_TEXT_CHARS})
        self.max_text_chars = p.max_text_chars
        self.grammar: TurnGrammar | None = self._grammar() if p.constrained is True else None
        self._constraining = False  # whether the current episode decodes under the grammar
        torch.manual_seed(self.seed)

    def _load(self, p: TransformersParams) -> tuple[Any, Any]:
        """The thinker and its processor; sets ``family`` and ``thinking`` first, so that a variant that
        cannot act is refused before its weights load."""
        tiny = family_for_alias(p.model)
        if tiny is not None:
            from omniagent.tiny_model import build_tiny_thinker

            self.family, self.thinking = tiny, self._thinking_format(tiny, p)
            return build_tiny_thinker(seed=self.seed, out_dir=p.tiny_dir, family=tiny)
        name = p.model
        if p.model == TINY_AGENT:
            from omniagent.tiny_agent import shipped_agent_dir

            name = str(shipped_agent_dir())
        self.family, model_type = _checkpoint_family(name)
        self.thinking = self._thinking_format(self.family, p)
        net = _load_family_thinker(self.family, name, model_type, self.dtype)
        return net, self.family.transformers_class("processor").from_pretrained(name)

    @staticmethod
    def _thinking_format(family: ModelFamily, p: TransformersParams) -> Any:
        """The family's reasoning-block format when this checkpoint's variant thinks, else None."""
        variant = family.variant(p.model, p.thinking)
        if not variant.agent:
            raise PolicyConfigError(f"{p.model!r} is {family.title}'s {variant.name} variant: {variant.note}")
        if p.thinking and family.thinking is None:
            raise PolicyConfigError(f"thinking=true: {family.title} has no thinking variant")
        return family.thinking if variant.thinking else None

    def _grammar(self) -> TurnGrammar:
        vocab = int(self.model.get_output_embeddings().weight.shape[0])
        prefix = self.thinking.grammar(self.max_thinking_chars) if self.thinking is not None else None
        eos = list(self.generation_config.eos_token_id)
        return TurnGrammar(
            self.processor.tokenizer, vocab, eos, prefix=prefix, max_text_chars=self.max_text_chars
        )

    @property
    def active_grammar(self) -> TurnGrammar | None:
        """The grammar this episode decodes under; None when it decodes unconstrained."""
        return self.grammar if self._constraining else None

    def reset(self, info: dict[str, Any]) -> None:
        """Compile the episode's turn schemas when decoding is constrained (see ``constrained``)."""
        self._constraining = False
        if self.constrained is False:
            return
        if "turn_schema" not in info and self.constrained == "auto":
            return  # not an environment episode: nothing to constrain to
        if self.grammar is None:
            self.grammar = self._grammar()
        self.grammar.reset(info)  # raises ConstraintUnavailable without the schema (constrained=True)
        self._constraining = True

    def _generation_config(self) -> Any:
        from transformers import GenerationConfig

        tok = self.processor.tokenizer
        base = getattr(self.model, "generation_config", None)
        config = copy.deepcopy(base) if base is not None else GenerationConfig()
        eos = []
        for token in ("<|im_end|>", "<|endoftext|>"):
            tid = tok.convert_tokens_to_ids(token)
            if isinstance(tid, int) and tid != tok.unk_token_id and tid not in eos:
                eos.append(tid)
        if tok.eos_token_id is not None and tok.eos_token_id not in eos:
            eos.append(tok.eos_token_id)
        config.eos_token_id = eos
        config.pad_token_id = tok.pad_token_id if tok.pad_token_id is not None else eos[-1]
        config.max_new_tokens = self.max_new_tokens
        config.max_length = None
        config.do_sample = self.temperature > 0
        config.temperature = self.temperature if self.temperature > 0 else 1.0
        config.top_p = self.top_p if self.temperature > 0 else 1.0
        config.top_k = None
        config.num_beams = 1
        config.output_logits = True
        config.return_dict_in_generate = True
        return config

    def act(self, messages: list[Message]) -> TurnOutput:
        with self._lock:
            return self._act(messages)

    def _act(self, messages: list[Message]) -> TurnOutput:
        import torch

        start = time.perf_counter()
        batch, prepared = build_model_inputs(
            messages,
            self.processor,
            image_pixels=self.image_pixels,
            video_pixels=self.video_pixels,
            allow_audio_in_video=self.use_audio_in_video,
            video_kwargs=self.video_kwargs,
        )
        inputs: dict[str, Any] = {}
        for key, value in batch.items():
            if isinstance(value, torch.Tensor):
                value = value.to(self.device)
                if key in MEDIA_INPUTS:
                    value = value.to(self.dtype)
            inputs[key] = value
        prompt_len = int(inputs["input_ids"].shape[1])
        extra: dict[str, Any] = {}
        if self.active_grammar is not None:
            # xgrammar's processor masks the scores in place, and generate(output_logits=True) keeps that same
            # tensor: the recorded token statistics are those of the grammar-masked distribution (at temperature 1)
            extra["logits_processor"] = [self.grammar.next_processor()]
        elif self.constrained is True:
            raise ConstraintUnavailable(
                "constrained=true but no episode was reset with the env's turn schema"
            )
        try:
            with torch.inference_mode():
                out = self.model.generate(**inputs, generation_config=self.generation_config, **extra)
        except (RuntimeError, ValueError, IndexError) as exc:  # this context, not the run: record, move on
            raise PolicyError(
                f"the model failed on this context ({prompt_len} prompt tokens): {type(exc).__name__}: {exc}"
            ) from exc
        new_ids = out.sequences[0, prompt_len:]
        steps = len(out.logits)
        logits = torch.stack([step[0] for step in out.logits])  # (steps, vocab)
        logprobs, entropies = token_stats_from_logits(logits, new_ids[:steps])
        text = self.processor.tokenizer.decode(new_ids, skip_special_tokens=True)
        thinking, text = self.thinking.split(text) if self.thinking is not None else (None, text)
        entropy_list = entropies.tolist()
        return TurnOutput(
            text=text,
            thinking=thinking,
            token_ids=[int(i) for i in new_ids.tolist()],
            token_logprobs=logprobs.tolist(),
            token_entropies=entropy_list,
            entropy=float(sum(entropy_list) / len(entropy_list)) if entropy_list else None,
            entropy_estimator="exact" if entropy_list else None,
            prompt_tokens=prompt_len,
            completion_tokens=int(new_ids.shape[0]),
            model_seconds=time.perf_counter() - start,
        )

    def close(self) -> None:
        import torch

        self.model = None
        if self.device.startswith("cuda"):
            torch.cuda.empty_cache()
