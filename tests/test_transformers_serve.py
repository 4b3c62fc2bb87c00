"""The OpenAI-compatible backend against a real non-vLLM server: ``transformers serve`` on 127.0.0.1
serving the tiny Qwen2.5-Omni thinker from a local folder (offline; nothing is downloaded).

``transformers serve`` answers HTTP 422 to request fields it does not know (vLLM's
``mm_processor_kwargs`` / ``media_io_kwargs``) and loads videos only from URLs or its own disk (an
inline data-URL mp4 fails in its ``load_video``). With ``server="auto"`` the backend detects a
non-vLLM server and sends a clip as labelled frames plus its sound, without vLLM's fields.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testkit import free_port

from envs.env import OmniVideoEnv
from omniagent.backends.openai_backend import OpenAIPolicy
from omniagent.policy import PolicyError

pytestmark = pytest.mark.slow  # builds the tiny model and starts a server: about a minute on 2 cores
STARTUP_S = 240


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``(base_url, model)`` of a running ``transformers serve`` with the tiny thinker."""
    cli = shutil.which("transformers")
    if cli is None:
        pytest.skip("the `transformers` CLI is not on PATH")
    pytest.importorskip(
        "fastapi", reason="transformers serve needs fastapi (pip install transformers[serving])"
    )
    pytest.importorskip(
        "uvicorn", reason="transformers serve needs uvicorn (pip install transformers[serving])"
    )
    from omniagent.tiny_model import build_tiny_thinker

    root = tmp_path_factory.mktemp("serve")
    model_dir = root / "tiny"
    build_tiny_thinker(seed=0, out_dir=model_dir)
    (root / "hf-cache").mkdir()  # its /v1/models scans the Hub cache and fails when there is none
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(root / "hf-cache")}
    port = free_port()
    log = (root / "serve.log").open("wb")
    cmd = [cli, "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while not _healthy(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (root / "serve.log").read_text(errors="replace")[-3000:]
                pytest.fail(f"transformers serve did not come up (exit {proc.poll()}):\n{tail}")
            time.sleep(1)
        yield f"{url}/v1", str(model_dir)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and nothing else
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def context_after(media: str, action: dict[str, Any]) -> list[dict[str, Any]]:
    env = OmniVideoEnv()
    try:
        env.reset(options={"media": media, "question": "Q?", "task_type": "mcq", "choices": ["x", "y"]})
        obs, *_ = env.step(json.dumps({"observation": "none", "thought": "t", "action": action}))
        return obs
    finally:
        env.close()


@pytest.mark.parametrize(
    "action",
    [
        {"type": "get_clip", "start": 2.0, "end": 5.0},
        {"type": "get_frames", "start": 0.0, "end": 8.0, "num": 2},
        {"type": "get_audio", "start": 2.0, "end": 5.0},
    ],
    ids=["clip", "frames", "audio"],
)
def test_every_percept_reaches_transformers_serve(served, video_path: Path, action: dict[str, Any]) -> None:
    url, model = served
    policy = OpenAIPolicy(model=model, base_url=url, retries=0, max_tokens=4, timeout=120)
    out = policy.act(context_after(str(video_path), action))
    assert isinstance(out.text, str) and out.prompt_tokens and out.prompt_tokens > 100
    assert 1 <= (out.completion_tokens or 0) <= 4
    if action["type"] == "get_clip":
        assert policy.server_kind() == "generic"  # detected: no vLLM fields, clip as frames + audio


def test_vllm_fields_are_refused_by_transformers_serve(served, video_path: Path) -> None:
    """What the backend sent to every server before: transformers serve answers 422."""
    url, model = served
    policy = OpenAIPolicy(model=model, base_url=url, retries=0, max_tokens=4, server="vllm", clip_as="video")
    with pytest.raises(PolicyError, match=r"HTTP 422.*(mm_processor_kwargs|media_io_kwargs)"):
        policy.act(context_after(str(video_path), {"type": "get_clip", "start": 2.0, "end": 5.0}))
