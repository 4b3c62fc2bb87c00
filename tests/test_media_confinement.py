"""Nothing outside ``media_root`` is read: the environment re-checks where a media file really is at
the moment it opens it (the ``media_root`` limit), not only when a dataset is loaded.

Each case is built here: small videos of different lengths (so what was opened shows in its
duration), symbolic links inside a root, and a link swapped to point outside after loading."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from media_factory import make_video
from testkit import compose_conf, rows_of

from envs.env import OmniVideoEnv
from envs.errors import ErrorCode, MediaError
from envs.limits import EnvLimits
from envs.media import MediaConfig, open_media
from envs.media_access import MediaAccess
from omniagent.cli_args import build_parser, make_limits

TASK = {"question": "How many?", "task_type": "num", "answer": 1}


@pytest.fixture()
def root_and_outside(tmp_path: Path) -> tuple[Path, Path]:
    """``root`` holds own.mp4 (1 s) and innocent.mp4, a link to ``outside``/private.mp4 (3 s)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir(), outside.mkdir()
    make_video(root / "own.mp4", duration=1.0, audio=False)
    make_video(outside / "private.mp4", duration=3.0, audio=False)
    os.symlink(outside / "private.mp4", root / "innocent.mp4")
    return root, outside


def test_the_env_refuses_a_link_out_of_media_root_unless_links_are_followed(
    root_and_outside: tuple[Path, Path],
) -> None:
    root, outside = root_and_outside
    env = OmniVideoEnv(limits={"media_root": str(root)})
    _, info = env.reset(options={"media": str(root / "own.mp4"), **TASK})
    assert info["media"]["duration"] == pytest.approx(1.0, abs=0.15)
    for name in (root / "innocent.mp4", outside / "private.mp4", root / ".." / "outside" / "private.mp4"):
        with pytest.raises(MediaError) as err:
            env.reset(options={"media": str(name), **TASK})
        assert err.value.code == ErrorCode.MEDIA_OUTSIDE_ROOT == "media_outside_root", name
        assert not err.value.transient and "outside media_root" in err.value.reason
    with pytest.raises(MediaError, match="follow_links_outside_media_root") as err:
        env.reset(options={"media": str(root / "innocent.mp4"), **TASK})
    assert str((outside / "private.mp4").resolve()) in err.value.reason  # where the link really leads
    # every open below the env is held to the root too (the audio track is opened on demand)
    access = MediaAccess(media_root=str(root))
    with pytest.raises(MediaError) as err:
        open_media(root / "innocent.mp4", MediaConfig(access=access))
    assert err.value.code == "media_outside_root"
    follow = OmniVideoEnv(limits={"media_root": str(root), "follow_links_outside_media_root": True})
    _, info = follow.reset(options={"media": str(root / "innocent.mp4"), **TASK})
    assert info["media"]["duration"] == pytest.approx(3.0, abs=0.15)  # the private file, read on purpose
    with pytest.raises(MediaError) as err:  # following links never lets a path written outside in
        follow.reset(options={"media": str(outside / "private.mp4"), **TASK})
    assert err.value.code == "media_outside_root"
    env.close(), follow.close()


def test_a_link_swapped_after_the_env_opened_it_is_refused_at_the_next_reset(
    root_and_outside: tuple[Path, Path],
) -> None:
    root, outside = root_and_outside
    link = root / "clip.mp4"
    os.symlink(root / "own.mp4", link)
    env = OmniVideoEnv(limits=EnvLimits(media_root=root))
    env.reset(options={"media": str(link), **TASK})  # inside: opened
    link.unlink()
    os.symlink(outside / "private.mp4", link)
    with pytest.raises(MediaError) as err:  # the same name again: judged again, not reused
        env.reset(options={"media": str(link), **TASK})
    assert err.value.code == "media_outside_root"
    env.close()


def test_without_media_root_nothing_changes(root_and_outside: tuple[Path, Path]) -> None:
    """A user's own file (``python -m omniagent.run video.mp4``): no root, links read where they lead."""
    root, outside = root_and_outside
    args = build_parser().parse_args([str(root / "innocent.mp4"), "How many?"])
    limits = make_limits(args)
    assert limits.media_root is None and limits.follow_links_outside_media_root is False
    assert EnvLimits().media_root is None and MediaConfig.from_limits(limits).access.media_root is None
    env = OmniVideoEnv(limits=limits)
    for name, seconds in (
        (root / "innocent.mp4", 3.0),
        (outside / "private.mp4", 3.0),
        (root / "own.mp4", 1.0),
    ):
        _, info = env.reset(options={"media": str(name), **TASK})
        assert info["media"]["duration"] == pytest.approx(seconds, abs=0.15), name
    env.close()


def test_an_eval_refuses_a_link_swapped_out_of_media_root_after_loading(
    root_and_outside: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dataset check passes (the link points inside when loaded); the link is then swapped to point
    outside; the env, given the dataset's media_root by the run, refuses it at reset: that task is a
    ``failed`` row with the code and nothing served, and the other task runs."""
    import omniagent.eval.pipeline as pipeline
    from omniagent.eval.pipeline import run_from_config

    root, outside = root_and_outside
    link = root / "swapped.mp4"
    os.symlink(root / "own.mp4", link)
    ann = root / "tasks.jsonl"
    rows = [{"id": "own", "media": "own.mp4", **TASK}, {"id": "swapped", "media": "swapped.mp4", **TASK}]
    ann.write_text("".join(json.dumps(r) + "\n" for r in rows))
    load = pipeline.load_tasks_from_config

    def load_then_swap(cfg: object, console: object = None) -> object:
        loaded = load(cfg, console)
        link.unlink()
        os.symlink(outside / "private.mp4", link)
        return loaded

    monkeypatch.setattr(pipeline, "load_tasks_from_config", load_then_swap)
    out = tmp_path / "run"
    ov = [f"out_dir={out}", "benchmark.dataset=tasks", f"benchmark.annotations={ann}",
          f"benchmark.media_root={root}", "unfreeze=true", "progress=false", "workers=1",
          "policy.name=uniform"]  # fmt: skip
    summary = run_from_config(compose_conf("eval", ov), overrides=ov)
    assert summary["run"]["failed"] == 1 and summary["run"]["errors"] == 0
    by_id = {r["id"]: r for r in rows_of(out)}
    assert by_id["own"]["status"] == "ok" and by_id["own"]["turns"] >= 1
    bad = by_id["swapped"]
    assert bad["status"] == "failed" and bad["error_code"] == "media_outside_root"
    assert bad["turns"] == 0 and bad["frames_used"] == 0
