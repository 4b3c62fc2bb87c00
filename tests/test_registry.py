"""envs/registry.py: one duplicate rule, enum names, a clear error for unknown names; used by scorers, decoders
and datasets."""

from __future__ import annotations

import sys
from enum import Enum

import pytest

from envs.decoders import DECODERS, make_decoder, register_decoder
from envs.registry import DuplicateNameError, Registry, UnknownNameError
from envs.scoring import SCORERS, get_scorer, register_scorer
from omniagent.datasets import DATASETS, load_dataset, register_dataset


class Color(str, Enum):  # StrEnum on Python >= 3.11; this form works on 3.10 too
    RED = "red"
    BLUE = "blue"


def test_decorator_getter_and_mapping_view() -> None:
    reg: Registry[object] = Registry("widget")

    @reg.register("a")
    def make_a() -> str:
        return "a"

    assert reg["a"] is make_a and make_a() == "a"  # the decorator returns the object unchanged
    assert "a" in reg and "b" not in reg and list(reg) == ["a"] and len(reg) == 1
    assert reg.get("b") is None and reg.names() == ["a"]


def test_same_object_again_is_a_no_op_a_different_one_raises() -> None:
    reg: Registry[object] = Registry("widget")
    first, second = object(), object()
    reg.add("x", first)
    assert reg.add("x", first) is first
    with pytest.raises(DuplicateNameError, match="widget 'x' is already registered"):
        reg.add("x", second)
    assert reg["x"] is first  # never overwritten
    reg.add("y", first)  # one object may have two names
    assert reg.names() == ["x", "y"]


def test_unknown_name_lists_the_known_ones() -> None:
    reg: Registry[int] = Registry("widget")
    reg.add("b", 2)
    reg.add("a", 1)
    with pytest.raises(UnknownNameError) as err:
        reg["c"]
    assert str(err.value) == "unknown widget 'c'; known: a, b"
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)
    with pytest.raises(KeyError, match="none registered"):
        Registry("widget")["x"]


def test_enum_names_catch_spelling_errors() -> None:
    reg: Registry[int] = Registry("colour", names=Color)
    reg.add(Color.RED, 1)
    reg.add("blue", 2)
    assert reg["red"] == 1 and reg[Color.BLUE] == 2 and list(reg) == ["red", "blue"]
    with pytest.raises(UnknownNameError, match=r"'rde' is not a colour name of Color \(red, blue\)"):
        reg.add("rde", 3)
    if sys.version_info >= (3, 11):
        from enum import StrEnum

        Shape = StrEnum("Shape", {"SQUARE": "square"})
        shapes: Registry[int] = Registry("shape", names=Shape)
        shapes.add(Shape.SQUARE, 4)
        assert shapes["square"] == 4


def test_scorers_use_the_registry() -> None:
    assert isinstance(SCORERS, Registry)
    assert set(SCORERS) == {"mcq", "tr", "num", "size", "ff"}
    with pytest.raises(DuplicateNameError):
        register_scorer("mcq")(type("Other", (SCORERS["num"],), {}))
    assert register_scorer("mcq")(SCORERS["mcq"]) is SCORERS["mcq"]  # re-registering the same class is fine
    with pytest.raises(ValueError, match="unknown task type 'essay'; known: ff, mcq, num, size, tr"):
        get_scorer("essay")


def test_decoders_use_the_registry(tmp_path) -> None:
    assert isinstance(DECODERS, Registry) and {"pyav", "decord"} <= set(DECODERS)
    with pytest.raises(DuplicateNameError):
        register_decoder("pyav")(DECODERS["decord"])
    with pytest.raises(ValueError, match="unknown video decoder 'ffmpeg'; known: decord, pyav"):
        make_decoder("ffmpeg", str(tmp_path / "x.mp4"), (64, 64))


def test_datasets_use_the_registry(tmp_path) -> None:
    assert isinstance(DATASETS, Registry) and {"videomme", "synthetic", "tasks"} <= set(DATASETS)
    wrapper = DATASETS["videomme"]
    adapter = wrapper.__wrapped__  # the per-row function the decorator was given
    assert register_dataset("videomme")(adapter) is adapter and DATASETS["videomme"] is wrapper  # no-op
    with pytest.raises(DuplicateNameError, match="dataset 'videomme' is already registered"):
        register_dataset("videomme")(lambda row, media_root: None)
    whole = DATASETS["synthetic"]  # registered with per_row=False: the function itself
    assert register_dataset("synthetic", per_row=False)(whole) is whole
    with pytest.raises(DuplicateNameError):
        register_dataset("synthetic", per_row=False)(lambda files, media_root: [])
    with pytest.raises(KeyError, match="unknown dataset 'nope'; known: .*videomme"):
        load_dataset("nope", tmp_path / "x.jsonl")
