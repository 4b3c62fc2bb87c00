"""Small helpers several test modules share (fixtures themselves live in conftest.py).

Why a module: the same free-port probe, strict JSON check and small synthetic-video settings were
written out in several test files; one copy keeps them the same.
"""

from __future__ import annotations

import copy
import csv
import functools
import json
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from envs.jsonl import read_jsonl
from envs.messages import count_media_parts
from omniagent.policy_base import Policy, TurnOutput

# Small synthetic videos (envs.synth's generator config): fast to make and to decode in a test.
SMALL_SYNTH: dict[str, Any] = {"width": 112, "height": 64, "fps": 2}


def free_port() -> int:
    """A TCP port nothing listens on now (for a server that must not be reachable, or one to start)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def strict_json(value: Any) -> str:
    """Strict UTF-8 JSON of an observation or info (media arrays as lists), as a trajectory writer does:
    NaN, unknown types and lone surrogates raise."""

    def default(o: Any) -> Any:
        if isinstance(o, np.ndarray | np.generic):
            return o.tolist()
        raise TypeError(type(o).__name__)

    text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=default)
    text.encode("utf-8")  # raises on a lone surrogate
    return text


def verl_tiny_thinker(folder: Path, family: str = "qwen2.5-omni") -> SimpleNamespace:
    """The tiny random thinker of ``family`` saved in ``folder / "thinker"``, with the processor verl builds
    through rl/verl_ext/omni_patches.py (needs verl): ``path``, ``model``, ``processor``, ``tokenizer``."""
    from omniagent.tiny_model import build_tiny_thinker
    from rl.verl_ext import omni_patches as verl_omni

    path = folder / "thinker"
    model, _ = build_tiny_thinker(seed=0, out_dir=path, family=family)
    processor = verl_omni.omni_hf_processor(str(path))
    return SimpleNamespace(path=path, model=model, processor=processor, tokenizer=processor.tokenizer)


def turn_text(obs: str, thought: str, action: dict[str, Any]) -> str:
    """One model turn in the environment's protocol, as a scripted test policy writes it."""
    return json.dumps({"observation": obs, "thought": thought, "action": action})


SFT_LIMITS = {
    "max_side": 64,
    "clip_fps": 2.0,
}  # the environment of the replayed SFT episodes (sft_trajectories)
SFT_VIDEO_TEXTS = [
    turn_text("none", "scan the video", {"type": "get_frames", "start": 0, "end": 20, "num": 3}),
    turn_text("grey barcoded frames at 0, 10, 20 s", "listen around the first burst", {"type": "get_audio", "start": 2, "end": 5}),
    turn_text("a 1000 Hz tone from 3 s", "watch it with sound", {"type": "get_clip", "start": 2.5, "end": 4}),
    turn_text("the clip shows the tone at 3 s", "the first tone is 1000 Hz", {"type": "answer", "content": "B"}),
]  # fmt: skip
SFT_AUDIO_TEXTS = [
    turn_text("none", "listen to the start", {"type": "get_audio", "start": 0, "end": 6}),
    turn_text("a tone at 3 s", "one burst so far; listen further", {"type": "get_audio", "start": 10, "end": 14}),
    turn_text("a second tone at 12 s", "two bursts", {"type": "answer", "content": "2"}),
]  # fmt: skip


def replay_episode(media: Path, texts: list[str], **task: Any) -> Any:
    """A scripted episode that plays ``texts`` on ``media`` and answers right, with no error on any turn."""
    import omniagent.backends.scripted  # noqa: F401  (registers "replay")
    from envs.env import OmniVideoEnv
    from omniagent.episode import run_episode
    from omniagent.policy import make_policy

    env = OmniVideoEnv(limits=SFT_LIMITS)
    try:
        traj = run_episode(
            env, make_policy("replay", texts=texts), {"media": str(media), **task, "max_turns": 6}
        )
    finally:
        env.close()
    traj.meta.update(env_limits=env.limits.model_dump(), task_id=traj.id)
    assert traj.stop_reason == "answered" and traj.reward == 1.0 and not any(t.error for t in traj.turns)
    return traj


def sft_trajectories(video_path: Path, audio_path: Path) -> list[Any]:
    """Two right answers replayed on the shared test media: an mcq on the video, a count on the audio."""
    return [
        replay_episode(video_path, SFT_VIDEO_TEXTS, question="Which tone plays first?", task_type="mcq",
                       choices=["500 Hz", "1000 Hz", "2000 Hz"], answer="B"),
        replay_episode(audio_path, SFT_AUDIO_TEXTS, question="How many tone bursts?", task_type="num", answer=2.0),
    ]  # fmt: skip


def teacher_trajectories(out: Path) -> list[Any]:
    """The perceiving teacher (``synth_teacher``, seeds 0 and 1) on every task of one 40 s synthetic video with
    sound, generated in ``out``: its Observations describe each percept exactly."""
    from envs.env import OmniVideoEnv
    from envs.synth import generate_benchmark
    from omniagent.episode import run_episode
    from omniagent.policy import make_policy

    tasks = generate_benchmark(out, seed=3, n_videos=1, durations=[40], config={"max_tasks_per_template": 1})
    env = OmniVideoEnv()
    trajs = [
        run_episode(env, make_policy("synth_teacher", seed=seed), task.env_options(8))
        for task in tasks
        for seed in (0, 1)
    ]
    env.close()
    return trajs


# Error codes of turns a constrained decoder can never produce: the turn schema rules them out.
SCHEMA_RULES_OUT = ("format_", "action_", "time_out_of_range", "num_invalid", "no_")


def assert_well_formed(traj: Any) -> None:
    """Every turn of ``traj`` parsed into an action, none failed for a reason the turn schema rules out,
    and the last one answered."""
    for rec in traj.turns:
        assert not (rec.error or "").startswith(SCHEMA_RULES_OUT), (rec.error, rec.error_message)
        assert rec.action_type is not None
    assert traj.turns[-1].action_type == "answer"


ROOT = Path(__file__).resolve().parents[1]


def load_script(relative: str) -> Any:
    """A script of the repository (``scripts/bench/...``) imported as a module, without running its main."""
    import importlib.util

    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compose_conf(config_name: str, overrides: list[str]) -> Any:
    """``conf/<config_name>.yaml`` composed by hydra with ``overrides``, as the command line composes it."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        return compose(config_name=config_name, overrides=overrides)


def small_synth_overrides(synth_dir: Path, out: Path) -> list[str]:
    """Eval overrides for a quick run: one 20 s synthetic video of :data:`SMALL_SYNTH` made in ``synth_dir``,
    results in ``out``, unfrozen, without a progress bar (each test adds its own)."""
    size = ", ".join(f"{k}: {v}" for k, v in SMALL_SYNTH.items())
    return [
        f"out_dir={out}", f"benchmark.dataset_kwargs.out_dir={synth_dir}", "benchmark.dataset_kwargs.n_videos=1",
        "benchmark.dataset_kwargs.durations=[20]", f"benchmark.dataset_kwargs.config={{{size}}}",
        "unfreeze=true", "progress=false",
    ]  # fmt: skip


class ForcedActions(Policy):
    """Runs ``model`` on the real context (raw percept included), then plays the next scripted action of
    ``actions`` with the model's token counts; ``media_parts``: how many media parts each turn saw."""

    name = "forced"

    def __init__(self, model: Policy, actions: list[dict[str, Any]]) -> None:
        self.model, self.actions, self.media_parts = model, actions, []

    def reset(self, info: dict[str, Any]) -> None:
        self.model.reset(info)
        self.i = 0

    def act(self, messages: list[Any]) -> TurnOutput:
        self.media_parts.append(count_media_parts(messages))
        out = self.model.act(messages)
        action, self.i = self.actions[self.i], self.i + 1
        return out.model_copy(update={"text": turn_text("x", "y", action)})


def decode_frames(path: Path, fps: float) -> dict[int, np.ndarray]:
    """Every decoded RGB frame of ``path`` by its frame index at ``fps``."""
    import av

    frames: dict[int, np.ndarray] = {}
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            frames[round(float(frame.pts * frame.time_base) * fps)] = frame.to_ndarray(format="rgb24")
    return frames


def decode_audio(path: Path) -> tuple[np.ndarray, int]:
    """The first audio stream of ``path`` as mono float32 samples, and its rate."""
    import av

    chunks = []
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        rate = stream.rate
        for frame in container.decode(stream):
            pcm = frame.to_ndarray()
            chunks.append(pcm.mean(axis=0) if pcm.ndim == 2 and frame.format.is_planar else pcm.reshape(-1))
    return np.concatenate(chunks).astype(np.float32), rate


def tone_level(signal: np.ndarray, sr: int, start: float, end: float, freq: float, band_hz: float) -> float:
    """The strongest spectral line within ``band_hz`` of ``freq`` in ``signal[start:end]`` (seconds), Hann window."""
    seg = signal[int(start * sr) : int(end * sr)]
    spectrum = np.abs(np.fft.rfft(seg * np.hanning(len(seg)))) / len(seg)
    return float(spectrum[np.abs(np.fft.rfftfreq(len(seg), 1 / sr) - freq) <= band_hz].max())


def sft_dataset(parquet: Path, model_dir: Path) -> Any:
    """:class:`rl.sft.dataset.OmniTurnSFTDataset` over ``parquet`` with the tokenizer of ``model_dir``."""
    from transformers import AutoTokenizer

    from rl.sft.dataset import OmniTurnSFTDataset

    tok = AutoTokenizer.from_pretrained(model_dir)
    return OmniTurnSFTDataset(
        str(parquet), tok, {"max_length": 8192, "pad_mode": "no_padding"}, processor=None
    )


def beep_options(media: Path, max_turns: int) -> dict[str, Any]:
    """Reset options of a two-choice question about the shared test video (the right answer is B)."""
    return {"media": str(media), "question": "Which beep is higher?", "task_type": "mcq",
            "choices": ["first", "second"], "answer": "B", "max_turns": max_turns}  # fmt: skip


# One look of each kind at the shared test video, then the answer (what a model episode test forces).
EVERY_PERCEPT = [
    {"type": "get_frames", "start": 0.0, "end": 10.0, "num": 2},
    {"type": "get_audio", "start": 2.0, "end": 4.0},
    {"type": "get_clip", "start": 11.0, "end": 13.0},
    {"type": "answer", "content": "B"},
]


def play_every_percept(model: Policy, media: Path) -> tuple[Any, ForcedActions]:
    """``model`` run on the real context of each turn of :data:`EVERY_PERCEPT` (64-pixel frames):
    the trajectory, and the :class:`ForcedActions` policy that played it."""
    from envs.env import OmniVideoEnv
    from omniagent.episode import run_episode

    policy = ForcedActions(model, EVERY_PERCEPT)
    env = OmniVideoEnv(limits={"max_side": 64})
    try:
        traj = run_episode(env, policy, beep_options(media, len(EVERY_PERCEPT)))
    finally:
        env.close()
    return traj, policy


def compose_taura(exp: str, *overrides: str) -> Any:
    """``conf/rl/taura.yaml`` (what ``python rl/train_taura.py`` reads; needs verl) composed in process with
    ``+exp=<exp>`` and ``overrides``: a fresh copy each call of one cached composition."""
    return copy.deepcopy(_compose_taura_cached((f"+exp={exp}", *overrides)))


@functools.cache
def _compose_taura_cached(overrides: tuple[str, ...]) -> Any:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf" / "rl"), version_base=None):
        return compose(config_name="taura", overrides=list(overrides))


def rows_of(out: Path) -> list[dict[str, Any]]:
    """The rows an eval run wrote to ``out / "results.jsonl"``."""
    return read_jsonl(out / "results.jsonl")


# The local trainer (rl/train_local.py) at tiny scale: 1-2 groups of 2-4 episodes, 2 turns each, short outputs.
TRAIN_LOCAL_SMALL = ["+exp=tiny", "data.train_batch_size=1", "actor_rollout_ref.rollout.n=2",
                     "data.max_response_length=16", "actor_rollout_ref.actor.ppo_mini_batch_size=1", "env.turns.min=2",
                     "env.turns.max=2", "local.progress=false"]  # fmt: skip


def synth_tasks(out: Path, seed: int, n: int) -> Path:
    """``python -m envs.synth`` with ``n`` 30 s videos of ``seed`` in ``out``: the path of its tasks.jsonl."""
    cmd = [sys.executable, "-m", "envs.synth", "--out", str(out), "--seed", str(seed), "--n", str(n),
           "--durations", "30"]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, timeout=300)
    return out / "tasks.jsonl"


def mcq_tasks(tasks: Path, out: Path) -> Path:
    """The mcq tasks of the tasks.jsonl ``tasks``, saved to ``out``."""
    from envs.tasks import load_tasks_jsonl, save_tasks_jsonl

    save_tasks_jsonl([t for t in load_tasks_jsonl(tasks) if t.task_type == "mcq"], out)
    return out


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file with a header line (a trainer's metrics.csv)."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# Chat messages with media parts, as the model backends take them (random pixels, 440 Hz tones).
RNG = np.random.default_rng(1234)
SR = 16_000


def image(h: int = 64, w: int = 64) -> np.ndarray:
    return RNG.integers(0, 256, (h, w, 3), dtype=np.uint8)


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


def text(s: str) -> dict:
    return {"type": "text", "text": s}


def image_part(ts: float, h: int = 64, w: int = 64) -> dict:
    return {"type": "image", "image": image(h, w), "timestamp": ts}


def audio_part(start: float, end: float) -> dict:
    return {"type": "audio", "audio": tone(end - start), "sampling_rate": SR, "start": start, "end": end}


def user(*parts: dict) -> dict:
    return {"role": "user", "content": list(parts)}


SYSTEM = {"role": "system", "content": [text("Answer with JSON.")]}


def audio_tokens(n_samples: int) -> int:
    """Qwen2.5-Omni audio tokens for a clip: mel frames (hop 160) -> conv stride 2 -> pool 2."""
    mel = n_samples // 160
    return ((mel - 1) // 2 + 1 - 2) // 2 + 1


SEARCH_LIMITS = {
    "max_frames": 8,
    "max_clip_s": 10.0,
    "max_audio_s": 30.0,
    "max_answer_chars": 40,
}  # testbed's caps


def play_teacher(
    task: Any, seed: int = 0, budget: int = 5, env_limits: dict | None = None, **teacher: Any
) -> Any:
    """One episode of the scripted teacher ``synth_teacher`` on ``task`` (a :class:`envs.tasks.Task`) under
    :data:`SEARCH_LIMITS`, in ``budget`` turns; ``env_limits``: more of the environment's limits
    (``mcq_option_text``), ``teacher``: its kwargs (``compact=True``)."""
    from envs.env import OmniVideoEnv
    from envs.limits import EnvLimits
    from omniagent.episode import run_episode
    from omniagent.policy import make_policy

    env = OmniVideoEnv(limits=EnvLimits(**SEARCH_LIMITS, **(env_limits or {})))
    try:
        policy = make_policy("synth_teacher", seed=seed, limits=SEARCH_LIMITS, **teacher)
        return run_episode(env, policy, task.env_options(budget), episode_id="t", seed=seed)
    finally:
        env.close()


def search_teacher_parquet(set_dir: Path, out: Path, n_samples: int = 1, **teacher: Any) -> Path:
    """The compact teacher's kept episodes on a search-level set (``set_dir/tasks.jsonl``), synthesised into
    ``out`` with the testbed recipe's caps and exported as SFT rows (``out/teacher.parquet``); ``teacher``: more of
    its kwargs (``span_quote=True``)."""
    from omegaconf import OmegaConf

    from rl.sft.export import export_parquet, load_trajectories
    from rl.synthesis.synthesize import run_synthesis

    cfg = OmegaConf.to_container(
        OmegaConf.load(Path(__file__).resolve().parents[1] / "conf" / "synthesize.yaml")
    )
    cfg.update(out_dir=str(out), n_samples=n_samples, seed=0)
    cfg["data"].update(tasks=str(set_dir / "tasks.jsonl"))
    cfg["teacher"].update(backend="synth_teacher", kwargs={"compact": True, **teacher})
    cfg["env"]["limits"].update(SEARCH_LIMITS)
    run_synthesis(cfg, progress=False)
    export_parquet(load_trajectories(out / "kept.jsonl"), out / "teacher.parquet")
    return out / "teacher.parquet"
