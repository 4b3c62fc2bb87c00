"""The trained tiny agent shipped inside the package: ``--model tiny`` / ``make_policy(..., model="tiny")``.

Why ship it: a ~5 MB checkpoint that plays an episode on a CPU in seconds lets anyone run a *trained*
agent with no download; the random model of :mod:`omniagent.tiny_model` keeps its own name,
``tiny-random``, for plumbing tests whose speed and meaning must not change.

Why a manifest: shipped weights are only worth something if one can tell what produced them.
``manifest.json`` (written by :func:`write_manifest`, next to the weights) records the recipe's
arguments, the sha256 of the files a loader reads, and fingerprints of the recipe's intermediate
outputs that a CI-sized rerun can recompute in seconds to minutes instead of retraining:

- ``train_tasks``: sha256 of the sorted lines of ``synth_train/tasks.jsonl`` (the data stage: seconds);
- ``sft_data``: sha256 of the sorted ``messages`` texts of ``sft_data/train.parquet`` (not the parquet
  bytes, not the media blobs: those differ between ffmpeg builds), and the row count;
- ``init``: sha256 of the untrained agent's ``tokenizer.json`` (the build stage is deterministic);
- ``sft_log``: the first logged losses of ``logs/sft.log``, compared within float tolerance on the
  prefix a rerun logged: the text warm-up's (a rerun with fewer ``--text-warmup-steps`` reproduces
  them), then the full-context SFT's (``first_losses``/``step_losses``: only with the same warm-up,
  and past ``--warmup-steps`` only with the same ``--steps``, as the cosine schedule spans the run);
  plus the sample count and the final mean loss, for the record;
- ``events_log``: the same for ``logs/sft_events.log``, the event-caption phase (``--event-steps``).

Cost of a rerun on 2 cores: ``train_tasks`` ~10 s (a test does it), ``sft_data`` + ``init`` ~4 min
(stages ``data synth export build``), the warm-up losses a few minutes more.

Producing and shipping it::

    python -m recipes.tiny_agent --out runs/tiny_agent               # trains runs/tiny_agent/agent
    python -m recipes.tiny_agent --out runs/tiny_agent --stages ship  # ship_agent(): copy + manifest
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from envs.jsonl import write_atomic
from omniagent.checkpoint import missing_files

__all__ = [
    "ASSET_DIR",
    "MANIFEST",
    "ProvenanceError",
    "ShippedAgentError",
    "compare_fingerprints",
    "recipe_fingerprints",
    "ship_agent",
    "shipped_agent_dir",
    "shipped_recipe_args",
    "verify_recipe",
    "verify_weights",
    "write_manifest",
]

ASSET_DIR = Path(__file__).resolve().parent / "assets" / "tiny_agent"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
# hashed in every manifest; every other file of the folder is hashed too (config, chat template...)
HASHED = ("model.safetensors", "tokenizer.json")
SHIPPED = (*HASHED, "config.json", "generation_config.json", "processor_config.json")
SHIPPED += ("tokenizer_config.json", "chat_template.jinja")
FIRST_LOSSES = 5  # logged losses kept per phase: what a short rerun can reproduce
LAST_LOSSES = 50  # the final losses' mean, for the record (a rerun would have to train fully)
# recipe arguments that change where or which stages run, not what is produced
NOT_RECORDED = ("out", "stages")
HOW_TO_SHIP = (
    "train it with `python -m recipes.tiny_agent --out runs/tiny_agent`, then ship it with "
    "`python -m recipes.tiny_agent --out runs/tiny_agent --stages ship` (omniagent.tiny_agent.ship_agent "
    "copies runs/tiny_agent/agent here and writes manifest.json)"
)


class ShippedAgentError(FileNotFoundError):
    """The shipped tiny agent's folder lacks a file a loader or its provenance needs."""


class ProvenanceError(ValueError):
    """Files or recipe outputs differ from what ``manifest.json`` records; ``mismatches`` lists them."""

    def __init__(self, what: str, mismatches: list[str]) -> None:
        self.mismatches = mismatches
        super().__init__(f"{what}: {'; '.join(mismatches)}")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def shipped_agent_dir(verify: bool = True) -> Path:
    """The shipped agent's folder, checked complete (and, with ``verify``, equal to its manifest).

    Hashing 5 MB takes milliseconds, so every load proves that the weights are the ones the manifest
    describes (a half-replaced folder fails here, not as a silently different agent).
    """
    missing = missing_files(ASSET_DIR)
    if not (ASSET_DIR / MANIFEST).is_file():
        missing.append(f"{MANIFEST} (provenance)")
    if missing:
        raise ShippedAgentError(
            f"the shipped tiny agent ({ASSET_DIR}) is incomplete, missing: {'; '.join(missing)}. "
            f"To restore it, {HOW_TO_SHIP}; `--model tiny-random` is the random model for plumbing."
        )
    if verify:
        verify_weights(ASSET_DIR)
    return ASSET_DIR


def _read_manifest(agent_dir: Path) -> dict[str, Any]:
    path = agent_dir / MANIFEST
    if not path.is_file():
        raise ShippedAgentError(f"{agent_dir} has no {MANIFEST}; {HOW_TO_SHIP}")
    return json.loads(path.read_text())


def shipped_recipe_args(keys: Iterable[str]) -> dict[str, Any]:
    """The recipe arguments ``keys`` the shipped agent was trained under, as its manifest records them
    (the one record of its per-call caps and token budget); a key the manifest lacks is an error."""
    recorded = _read_manifest(ASSET_DIR).get("recipe_args") or {}
    missing = [k for k in keys if k not in recorded]
    if missing:
        raise ShippedAgentError(f"{ASSET_DIR / MANIFEST} records no recipe argument {', '.join(missing)}")
    return {k: recorded[k] for k in keys}


def verify_weights(agent_dir: str | Path) -> dict[str, Any]:
    """Check the sha256 of every hashed file against ``manifest.json``; return the manifest."""
    folder = Path(agent_dir)
    manifest = _read_manifest(folder)
    mismatches = []
    for name, want in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            mismatches.append(f"{name} is missing")
        elif (got := sha256_file(path)) != want["sha256"]:
            mismatches.append(f"{name} has sha256 {got[:12]}..., the manifest says {want['sha256'][:12]}...")
    if mismatches:
        raise ProvenanceError(
            f"{folder} is not the agent its {MANIFEST} describes (replace the folder and its manifest "
            f"together: {HOW_TO_SHIP})",
            mismatches,
        )
    return manifest


def _texts_sha256(texts: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for text in sorted(texts):
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little") + data)  # length-prefixed: no join ambiguity
    return digest.hexdigest()


def tasks_fingerprint(tasks_file: Path) -> dict[str, Any]:
    """sha256 over the sorted task lines (media named relative to the file, so the folder does not count)."""
    lines = [line for line in tasks_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {"tasks": len(lines), "tasks_sha256": _texts_sha256(lines)}


def messages_fingerprint(parquet: Path) -> dict[str, Any]:
    """sha256 over the sorted ``messages`` JSON texts (row order and media bytes do not count)."""
    import pyarrow.parquet as pq

    texts = pq.read_table(str(parquet), columns=["messages"]).column("messages").to_pylist()
    return {"rows": len(texts), "messages_sha256": _texts_sha256(texts)}


def _json_lines(lines: Iterable[str]) -> Iterable[dict[str, Any]]:
    for line in lines:
        if line.startswith("{"):
            try:
                yield json.loads(line)
            except ValueError:
                continue  # a progress bar or a truncated line


def sft_log_fingerprint(log: Path) -> dict[str, Any]:
    """The first logged warm-up and SFT losses (what a short rerun reproduces) and the final record."""
    warmup: list[list[float]] = []
    steps: list[list[float]] = []
    final: dict[str, Any] | None = None
    for row in _json_lines(log.read_text(errors="replace").splitlines()):
        if "warmup_step" in row and len(warmup) < FIRST_LOSSES:
            warmup.append([row["warmup_step"], row["loss"]])
        elif "step" in row and "loss" in row and "resumed_from" not in row and len(steps) < FIRST_LOSSES:
            steps.append([row["step"], row["loss"]])
        elif "losses" in row and "samples" in row:
            final = row
    out: dict[str, Any] = {"warmup_losses": warmup, "step_losses": steps}
    if final is not None:
        losses = [float(x) for x in final["losses"]]
        tail = losses[-LAST_LOSSES:]
        out |= {"samples": final["samples"], "steps": len(losses), "first_losses": losses[:FIRST_LOSSES]}
        out["final_mean_loss"] = round(sum(tail) / len(tail), 4) if tail else None
    return out


def recipe_fingerprints(recipe_out: str | Path) -> dict[str, Any]:
    """Fingerprints of whichever recipe outputs exist under ``recipe_out`` (a short rerun has fewer)."""
    root = Path(recipe_out)
    prints: dict[str, Any] = {}
    if (tasks := root / "synth_train" / "tasks.jsonl").is_file():
        prints["train_tasks"] = tasks_fingerprint(tasks)
    if (parquet := root / "sft_data" / "train.parquet").is_file():
        prints["sft_data"] = messages_fingerprint(parquet)
    if (tok := root / "init" / "tokenizer.json").is_file():
        prints["init"] = {"tokenizer_sha256": sha256_file(tok)}
    for part, name in (("sft_log", "sft.log"), ("events_log", "sft_events.log")):
        if (log := root / "logs" / name).is_file():
            prints[part] = sft_log_fingerprint(log)
    return prints


def _close(want: list[Any], got: list[Any], atol: float) -> bool:
    """Equal on the common prefix (a rerun may stop earlier): losses within ``atol``, and for
    ``[step, loss]`` pairs the step numbers exactly."""
    for a, b in zip(want, got, strict=False):
        if isinstance(a, list) and (a[0] != b[0] or not math.isclose(a[1], b[1], abs_tol=atol)):
            return False
        if not isinstance(a, list) and not math.isclose(a, b, abs_tol=atol):
            return False
    return True


def compare_fingerprints(
    expected: Mapping[str, Any], actual: Mapping[str, Any], loss_atol: float = 0.02
) -> list[str]:
    """Mismatches between two fingerprint sets, on the parts both have; empty when they agree."""
    bad = []
    for part in ("train_tasks", "sft_data", "init"):
        if part in expected and part in actual and expected[part] != actual[part]:
            bad.append(f"{part}: manifest {expected[part]}, rerun {actual[part]}")
    for log in ("sft_log", "events_log"):
        want, got = expected.get(log), actual.get(log)
        if want is None or got is None:
            continue
        for key in ("warmup_losses", "step_losses", "first_losses"):
            if key in want and key in got and not _close(want[key], got[key], loss_atol):
                bad.append(f"{log}.{key}: manifest {want[key]}, rerun {got[key]}")
        if "samples" in want and "samples" in got and want["samples"] != got["samples"]:
            bad.append(f"{log}.samples: manifest {want['samples']}, rerun {got['samples']}")
    return bad


def verify_recipe(agent_dir: str | Path, recipe_out: str | Path, loss_atol: float = 0.02) -> list[str]:
    """Check a (possibly partial) recipe rerun against ``agent_dir``'s manifest; return what was
    compared. Raises :class:`ProvenanceError` on a mismatch, ``ValueError`` when nothing overlaps."""
    manifest = _read_manifest(Path(agent_dir))
    actual = recipe_fingerprints(recipe_out)
    bad = compare_fingerprints(manifest["fingerprints"], actual, loss_atol)
    if bad:
        raise ProvenanceError(f"{recipe_out} does not reproduce {Path(agent_dir) / MANIFEST}", bad)
    compared = sorted(set(manifest["fingerprints"]) & set(actual))
    if not compared:
        raise ValueError(
            f"{recipe_out} has none of synth_train/tasks.jsonl, sft_data/train.parquet, "
            "init/tokenizer.json, logs/sft.log"
        )
    return compared


def _hashed_files(folder: Path) -> list[str]:
    """Every file a loader may read: anything in the folder but the manifest (and hidden files)."""
    names = {p.name for p in folder.iterdir() if p.is_file() and p.name != MANIFEST}
    return sorted({n for n in names if not n.startswith(".")} | set(HASHED))


def _plain(value: Any) -> Any:
    """JSON-ready recipe argument values (paths as text, tuples as lists)."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def write_manifest(agent_dir: str | Path, recipe_out: str | Path, recipe_args: Mapping[str, Any]) -> Path:
    """Write ``agent_dir/manifest.json`` for the agent in ``agent_dir`` trained under ``recipe_out``.

    ``recipe_args``: the recipe's arguments (``vars(args)``); ``out`` and ``stages`` are left out
    because they do not change what is produced.
    """
    folder = Path(agent_dir)
    gaps = missing_files(folder)
    if gaps:
        raise ShippedAgentError(f"{folder} is not a complete checkpoint, missing: {'; '.join(gaps)}")
    args = {k: _plain(v) for k, v in sorted(recipe_args.items()) if k not in NOT_RECORDED}
    manifest = {
        "format": MANIFEST_FORMAT,
        "produced_by": "python -m recipes.tiny_agent",
        "recipe_args": args,
        "files": {
            n: {"sha256": sha256_file(folder / n), "bytes": (folder / n).stat().st_size}
            for n in _hashed_files(folder)
        },
        "fingerprints": recipe_fingerprints(recipe_out),
        "written": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return write_atomic(folder / MANIFEST, json.dumps(manifest, indent=2) + "\n")


def ship_agent(recipe_out: str | Path, recipe_args: Mapping[str, Any], dest: str | Path = ASSET_DIR) -> Path:
    """Copy ``recipe_out/agent``'s loadable files into ``dest`` (the package's folder by default),
    remove anything else there, and write the manifest; return ``dest``. The copy is checked first, so
    a failed ship never leaves a half-replaced folder."""
    src, target = Path(recipe_out) / "agent", Path(dest)
    gaps = missing_files(src)
    if gaps:
        raise ShippedAgentError(f"{src} is not a complete checkpoint, missing: {'; '.join(gaps)}")
    staging = target.with_name(target.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in SHIPPED:
        if (src / name).is_file():  # the alternatives check_checkpoint accepts are not all shipped
            shutil.copyfile(src / name, staging / name)
    write_manifest(staging, recipe_out, recipe_args)
    shutil.rmtree(target, ignore_errors=True)
    staging.replace(target)
    return target
