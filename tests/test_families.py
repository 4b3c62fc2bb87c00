"""The model-family specs: lookups, media-token counting, placeholder blocks, thinking blocks, variants."""

from __future__ import annotations

import json
import re

import pytest

from omniagent.families import (
    FAMILIES,
    UnknownFamilyError,
    family_for_alias,
    family_for_model_type,
    get_family,
)
from omniagent.families.spec import Thinking

QWEN25, QWEN3 = get_family("qwen2.5-omni"), get_family("qwen3-omni")


def test_lookups_by_name_model_type_and_alias() -> None:
    assert set(FAMILIES) == {"qwen2.5-omni", "qwen3-omni"}
    for family in FAMILIES.values():
        assert family_for_model_type(family.thinker_model_type) is family
        assert family_for_model_type(family.full_model_type) is family
        assert all(family_for_alias(a) is family for a in family.tiny.aliases)
    assert family_for_alias("tiny") is None and family_for_alias("Qwen/Qwen3-Omni-30B-A3B-Instruct") is None
    with pytest.raises(UnknownFamilyError, match="'llama'.*known.*qwen3_omni_moe_thinker"):
        family_for_model_type("llama")
    with pytest.raises(UnknownFamilyError, match="known: qwen2.5-omni, qwen3-omni"):
        get_family("qwen4-omni")


@pytest.mark.parametrize(
    ("seconds", "qwen25", "qwen3"),
    # Qwen2.5-Omni: 25 tokens per second; Qwen3-Omni: 13 per full second plus the remainder's convolutions
    [(1.0, 25, 13), (2.3, 57, 30), (4.0, 100, 52), (0.5, 12, 7), (30.0, 750, 390)],
)
def test_audio_tokens_per_family(seconds: float, qwen25: int, qwen3: int) -> None:
    samples = int(seconds * 16_000)
    assert QWEN25.audio_tokens(samples) == qwen25
    assert QWEN3.audio_tokens(samples) == qwen3


def test_visual_tokens_and_geometry() -> None:
    assert QWEN25.visual_tokens((4, 4, 4)) == QWEN3.visual_tokens([4, 4, 4]) == 16  # 2x2 spatial merge
    assert (QWEN25.processor.pixels_per_token, QWEN3.processor.pixels_per_token) == (28, 32)
    assert (QWEN25.processor.position_id_per_seconds, QWEN3.processor.position_id_per_seconds) == (25, 13)
    assert QWEN3.processor.video_kwargs_from_config == ("position_id_per_seconds",)


def test_placeholder_blocks_and_tiny_templates() -> None:
    assert QWEN25.tokens.block("video") == "<|vision_bos|><|VIDEO|><|vision_eos|>"
    assert QWEN3.tokens.block("audio") == "<|audio_start|><|audio_pad|><|audio_end|>"
    assert QWEN3.tokens.block("image") == "<|vision_start|><|image_pad|><|vision_end|>"
    with pytest.raises(ValueError, match="smell"):
        QWEN3.tokens.block("smell")
    for family in FAMILIES.values():
        assert set(family.tokens.all()) <= set(family.tiny.special_tokens)
        for kind in ("image", "video", "audio"):
            assert family.tokens.block(kind) in family.tiny.chat_template
    assert "You are a helpful assistant." in QWEN25.tiny.chat_template  # default system message
    assert "<|im_start|>system" not in QWEN3.tiny.chat_template  # the family adds none


def test_media_token_ids_read_the_tokenizer() -> None:
    class Tok:
        unk_token_id = 0
        vocab = {t: i + 1 for i, t in enumerate(QWEN3.tokens.all())}

        def convert_tokens_to_ids(self, token: str) -> int:
            return self.vocab.get(token, 0)

    assert QWEN3.media_token_ids(Tok()) == list(range(1, 8))
    assert QWEN25.media_token_ids(Tok()) == []  # none of Qwen2.5-Omni's spellings: unknown ids are dropped


@pytest.mark.parametrize(
    ("text", "thinking", "rest"),
    [
        ('<think>\nlook at 10 s\n</think>\n\n{"a": 1}', "look at 10 s", '{"a": 1}'),
        ('{"a": 1}', None, '{"a": 1}'),  # no block: untouched
        ('the template opened it</think>{"a": 1}', "the template opened it", '{"a": 1}'),
        (
            '<think>ran out of tokens {"a": 1}',
            None,
            '<think>ran out of tokens {"a": 1}',
        ),  # unclosed: the env refuses
    ],
)
def test_thinking_split(text: str, thinking: str | None, rest: str) -> None:
    assert QWEN3.thinking is not None and QWEN3.thinking.split(text) == (thinking, rest)


def test_thinking_grammar_and_variants() -> None:
    think = Thinking()
    assert think.grammar(40) == r'root ::= "<think>" [^<]{0,40} "</think>" [ \n]*'
    assert Thinking(opened_by_template=True).grammar(None) == r'root ::= [^<]* "</think>" [ \n]*'
    assert QWEN3.variant("Qwen/Qwen3-Omni-30B-A3B-Thinking").thinking
    assert not QWEN3.variant("Qwen/Qwen3-Omni-30B-A3B-Instruct").thinking
    assert not QWEN3.variant("/ckpt/Qwen3-Omni-30B-A3B-Captioner").agent
    assert QWEN3.variant("/ckpt/my-sft", thinking=True).name == "thinking"  # the flag wins over the name
    assert QWEN3.variant("Qwen/Qwen3-Omni-30B-A3B-Thinking", thinking=False).name == "instruct"
    assert QWEN25.thinking is None and [v.name for v in QWEN25.variants] == ["instruct"]


def test_thinking_grammar_compiles_with_the_turn_schema() -> None:
    xgr = pytest.importorskip("xgrammar")
    turn = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    grammar = xgr.Grammar.concat(
        xgr.Grammar.from_ebnf(QWEN3.thinking.grammar(8)), xgr.Grammar.from_json_schema(json.dumps(turn))
    )
    assert re.search(r'"<think>" .*\{0, 8\}', str(grammar))


def test_installed_processors_take_audio_in_video() -> None:
    pytest.importorskip("transformers")
    for family in FAMILIES.values():
        assert "use_audio_in_video" in family.videos_kwargs_keys()
        assert family.supports_audio_in_video()
    assert "position_id_per_seconds" in QWEN3.videos_kwargs_keys()


def test_a_reasoning_block_joins_as_the_model_writes_it_and_splits_back() -> None:
    think = QWEN3.thinking
    joined = think.join(" look at 3 s ", '{"a": 1}')
    assert joined == '<think>\nlook at 3 s\n</think>\n\n{"a": 1}' and think.split(joined) == (
        "look at 3 s",
        '{"a": 1}',
    )
    opened = Thinking(opened_by_template=True)  # the generation prompt already holds <think>
    assert opened.join("r", "t") == "\nr\n</think>\n\nt" and opened.split(opened.join("r", "t")) == ("r", "t")


def test_verl_gaps_are_declared_per_family_and_feature() -> None:
    assert QWEN25.patches.verl_gap("lora") is None
    assert QWEN3.patches.verl_gap("lora").startswith("verl 0.9.1 has no LoRA path for the Qwen3-Omni thinker")
    assert QWEN3.patches.verl_gap("flying") is None
    for family in FAMILIES.values():
        assert family.patches.vllm == ("register_standalone_thinker",)
        assert "ulysses_input_slicing" in family.patches.verl
