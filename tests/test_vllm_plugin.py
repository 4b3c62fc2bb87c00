"""The vLLM plugin (rl/verl_ext/vllm_plugin.py) and the media-token leaf module (rl/verl_ext/media_tokens.py).

The plugin runs in every vLLM process, a plain `vllm serve` included: it must stay light and side-effect free.
vLLM itself is not installed on CPU, so registration runs against a stand-in `vllm` module with the one API
the plugin calls (`ModelRegistry.get_supported_archs` / `register_model`)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("verl", "ray", "torch", "transfer_queue")


def _entry_point() -> tuple[str, str]:
    """(module, function) of the `vllm.general_plugins` entry point that pyproject.toml declares."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    plugins = project["project"]["entry-points"]["vllm.general_plugins"]
    module, _, func = plugins["omniagent"].partition(":")
    return module, func


def test_importing_the_plugin_module_imports_nothing_heavy_and_patches_nothing():
    module, func = _entry_point()
    code = (
        "import json, sys\n"
        f"import {module} as plugin\n"
        f"assert callable(plugin.{func})\n"
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert json.loads(out.stdout) == []


class _FakeRegistry:
    def __init__(self) -> None:
        self.archs = ["Qwen2_5OmniModel"]
        self.calls: list[tuple[str, str]] = []

    def get_supported_archs(self) -> list[str]:
        return list(self.archs)

    def register_model(self, arch: str, target: str) -> None:
        self.calls.append((arch, target))
        self.archs.append(arch)


def test_register_vllm_names_the_lazy_class_once(monkeypatch):
    module, func = _entry_point()
    plugin = importlib.import_module(module)
    registry = _FakeRegistry()
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(ModelRegistry=registry))
    getattr(plugin, func)()
    getattr(plugin, func)()  # vLLM may load plugins more than once per process
    # one standalone thinker per family, each under the architecture its thinker-only config.json declares
    assert registry.calls == [
        ("Qwen2_5OmniThinkerForConditionalGeneration", f"{module}:VllmQwen2_5OmniThinker"),
        ("Qwen3OmniMoeThinkerForConditionalGeneration", f"{module}:VllmQwen3OmniMoeThinker"),
    ]
    assert registry.calls[0] == (plugin.VLLM_THINKER_ARCH, f"{module}:{plugin.VLLM_THINKER_CLASS}")
    with pytest.raises(AttributeError):
        plugin.NoSuchClass  # noqa: B018 - the PEP 562 hook answers only for the thinker classes


def test_installed_entry_point_is_the_declared_one():
    """vLLM finds plugins through the installed metadata: it must name what pyproject.toml declares."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        installed = distribution("omniagent").entry_points
    except PackageNotFoundError:
        pytest.skip("omniagent is not pip-installed here")
    module, func = _entry_point()
    plugins = [ep.value for ep in installed if ep.group == "vllm.general_plugins" and ep.name == "omniagent"]
    assert plugins == [f"{module}:{func}"], "stale install: run `pip install -e .` again"


def test_media_token_helper_is_a_leaf():
    """rl.verl_ext.media_tokens is shared by the agent loop and the verl patches without importing either (no cycle)."""
    code = (
        "import json, sys\n"
        "import rl.verl_ext.media_tokens\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('rl.', 'verl', 'torch')))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert json.loads(out.stdout) == [
        "rl.verl_ext",
        "rl.verl_ext.media_tokens",
    ]  # its package imports nothing
