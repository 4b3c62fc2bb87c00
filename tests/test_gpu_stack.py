"""The GPU install resolves to the stack verl tested: the ``[gpu]`` and ``[vllm]`` extras of pyproject.toml
agree with the installed verl's own ``[vllm]`` extra, and its pins satisfy this package's base requirements.

Reads metadata only (pyproject.toml and the installed verl's); downloads nothing. It fails when verl is
upgraded without updating the extras, or when the extras are edited away from what verl declares.
"""

from __future__ import annotations

import importlib.metadata as metadata
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
from packaging.requirements import Requirement  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]


def verl_extra(name: str) -> dict[str, Requirement]:
    """The requirements the installed verl declares for ``[name]``, by package name."""
    try:
        declared = metadata.requires("verl") or []
    except metadata.PackageNotFoundError:
        pytest.skip("verl is not installed (scripts/setup.sh installs it)")
    out = {}
    for line in declared:
        req = Requirement(line)
        if (
            req.marker is not None
            and req.marker.evaluate({"extra": name})
            and not req.marker.evaluate({"extra": ""})
        ):
            out[req.name.lower()] = req
    return out


def pins(requirements: list[str]) -> dict[str, str]:
    """``name -> version`` of every exact pin (``name==version``) in ``requirements``."""
    out = {}
    for line in requirements:
        req = Requirement(line)
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator == "==":
            out[req.name.lower()] = specs[0].version
    return out


def test_the_installed_verl_is_the_pinned_one() -> None:
    verl_extra("vllm")  # skips without verl
    installed = metadata.version("verl")
    assert pins(EXTRAS["train"])["verl"] == installed
    (gpu,) = EXTRAS["gpu"]
    req = Requirement(gpu)
    assert (req.name, req.extras, str(req.specifier)) == ("verl", {"vllm"}, f"=={installed}")


def test_the_vllm_extra_pins_what_verl_tested() -> None:
    tested = verl_extra("vllm")
    assert {"vllm", "torch", "transformers"} <= set(tested)
    ours = pins(EXTRAS["vllm"])
    theirs = {name: str(req.specifier) for name, req in tested.items() if name not in ("verl", "mbridge")}
    assert {name: f"=={version}" for name, version in ours.items()} == theirs


def test_verls_gpu_pins_satisfy_the_base_requirements() -> None:
    """A pinned version outside a base requirement (e.g. transformers<5.11) would make ``.[gpu]`` unresolvable."""
    tested = pins([str(r) for r in verl_extra("vllm").values()])
    base = {Requirement(line).name.lower(): Requirement(line) for line in PROJECT["dependencies"]}
    checked = [name for name in tested if name in base]
    assert {"torch", "transformers"} <= set(checked)
    for name in checked:
        assert base[name].specifier.contains(tested[name], prereleases=True), (
            name,
            tested[name],
            str(base[name]),
        )
