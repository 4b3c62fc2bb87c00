"""Adapters for published benchmarks (Video-MME, LVBench, Daily-Omni, WorldSense, LongVALE,
VSI-Bench), following each release's field names, and for the synthetic benchmark of :mod:`envs.synth`."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from envs.tasks import Task
from omniagent.datasets.core import DatasetError, Row, RowError
from omniagent.datasets.fields import (
    answer_letter,
    build_task,
    embedded_options,
    first_existing_media,
    format_template,
    get_field,
    media_candidates,
    parse_options,
    parse_timestamp,
    question_hash,
)
from omniagent.datasets.layouts import dailyomni_domain, nested_videomme_rows
from omniagent.datasets.registry import Produced, register_dataset


@register_dataset("videomme")
def videomme(
    row: Row, media_root: Any, media_template: str | list[str] | None = None, **_: Any
) -> Task | list[Task]:
    """Video-MME (the ``videomme/test-*.parquet`` release, or the same records as JSON/JSONL).

    Fields per question: ``video_id`` ("001"), ``duration`` ("short" | "medium" | "long"), ``domain``,
    ``sub_category``, ``url``, ``videoID`` (the YouTube id, also the file name), ``question_id``
    ("001-1"), ``task_type`` (e.g. "Counting Problem"), ``question``, ``options`` (["A. ...", "B. ...",
    "C. ...", "D. ..."]), ``answer`` ("A".."D"). Media: ``{videoID}.mp4`` under the media root (also
    tried: ``data/``, ``videos/`` sub-folders, ``.mkv``). ``Task.extra`` keeps ``category``
    (= task_type), ``duration_label``, ``domain`` and ``sub_category``; subtitles are not used.
    The nested layout (``videomme_json_file.json``: per video ``video_id``, ``duration``, ``domain``,
    ``sub_category``, ``url`` = the YouTube id, ``questions: [...]``) is read too.
    """
    if isinstance(row.data.get("questions"), list):
        return [videomme(sub, media_root, media_template) for sub in nested_videomme_rows(row)]
    vid = str(get_field(row, "videoID", "video_name", "youtube_id"))
    choices = parse_options(row, get_field(row, "options"))
    defaults = [f"{vid}.mp4", f"data/{vid}.mp4", f"videos/{vid}.mp4", f"{vid}.mkv"]
    cands = [format_template(t, row) for t in media_candidates(media_template, [])] or defaults
    return build_task(
        row,
        id=f"videomme-{get_field(row, 'question_id')}",
        media=first_existing_media(media_root, cands),
        question=str(get_field(row, "question")),
        task_type="mcq",
        choices=choices,
        answer=answer_letter(row, get_field(row, "answer"), choices),
        source="videomme",
        extra={
            "category": get_field(row, "task_type", required=False),
            "duration_label": get_field(row, "duration", required=False),
            "domain": get_field(row, "domain", required=False),
            "sub_category": get_field(row, "sub_category", required=False),
            "video_id": get_field(row, "video_id", required=False),
        },
    )


def _span(text: Any) -> list[float] | None:
    """``"00:15-00:19"`` / ``"1:02:03-1:02:10"`` -> [start, end] seconds; None when unparseable."""
    if not isinstance(text, str) or "-" not in text:
        return None
    a, _, b = text.partition("-")
    try:
        start, end = parse_timestamp(a), parse_timestamp(b)
    except ValueError:
        return None
    return [start, end] if 0 <= start <= end else None


@register_dataset("lvbench")
def lvbench(row: Row, media_root: Any, media_template: str | list[str] | None = None, **_: Any) -> list[Task]:
    """LVBench (``video_info.meta.jsonl``): one record per video holding its questions.

    Fields: ``key`` (the YouTube id, also the file name), ``type`` (video category), ``video_info``
    ({``duration_minutes``, ``fps``, ...}), ``qa``: a list of {``uid``, ``question`` (the stem followed
    by option lines ``"(A) ..."``), ``answer`` ("A".."D"), ``question_type`` (a list of categories),
    ``time_reference`` ("MM:SS-MM:SS", the evidence span)}. Media: ``{key}.mp4``. Each question
    becomes one mcq task with ``evidence`` from ``time_reference`` when it parses. lmms-eval's flat
    export (``video_path``, ``question``, ``options``, ``answer``) is read by :func:`lvbench_flat`.
    """
    if "qa" not in row.data and "video_path" in row.data:
        vp = str(row.data["video_path"])
        cands = [format_template(t, row) for t in media_candidates(media_template, [])] or [
            vp,
            f"videos/{Path(vp).name}",
        ]
        return [lvbench_flat(row, first_existing_media(media_root, cands))]
    key = str(get_field(row, "key", "video_id"))
    defaults = [f"{key}.mp4", f"videos/{key}.mp4", f"{key}.mkv"]
    cands = [format_template(t, row) for t in media_candidates(media_template, [])] or defaults
    media = first_existing_media(media_root, cands)
    qa = get_field(row, "qa")
    if not isinstance(qa, list):
        raise RowError(row.where, "'qa' must be a list of questions")
    tasks = []
    for i, q in enumerate(qa):
        sub = Row(q if isinstance(q, dict) else {}, f"{row.where} qa[{i}]")
        if not isinstance(q, dict):
            raise RowError(sub.where, "each qa entry must be an object")
        stem, options = embedded_options(sub, get_field(sub, "question"))
        uid = get_field(sub, "uid", default=f"{key}-{i}", required=False)
        tasks.append(_lvbench_task(sub, uid, media, stem, options, video_type=row.data.get("type")))
    return tasks


def _lvbench_task(row: Row, uid: Any, media: str, stem: str, choices: list[str], **extra: Any) -> Task:
    """One LVBench question as an mcq task, the same for the release's ``qa`` lists and lmms-eval's flat
    records: ``answer`` (a letter or an option's text), ``question_type`` (the category, a list joined) and
    ``time_reference`` (the evidence span when it parses) are read from ``row``; ``extra`` adds fields."""
    ref = row.data.get("time_reference")
    span = _span(ref)
    qtype = row.data.get("question_type")
    return build_task(
        row,
        id=f"lvbench-{uid}",
        media=media,
        question=stem,
        task_type="mcq",
        choices=choices,
        answer=answer_letter(row, get_field(row, "answer"), choices),
        evidence=[span] if span else None,
        source="lvbench",
        extra={
            "category": ", ".join(qtype) if isinstance(qtype, list) else qtype,
            **extra,
            "time_reference": ref,
        },
    )


def lvbench_flat(row: Row, media: str) -> Task:
    """One record of lmms-eval's LVBench export: ``video_path``, ``question``, ``options`` (a list,
    optional: else the options are the ``(A) ...`` lines of the question) and ``answer``; ``uid``,
    ``question_type`` and ``time_reference`` are used when present."""
    text = str(get_field(row, "question"))
    raw = row.data.get("options")
    if raw:
        stem, choices = text, parse_options(row, raw)
    else:
        stem, choices = embedded_options(row, text)
    vid = Path(str(get_field(row, "video_path"))).stem
    uid = get_field(row, "uid", "id", required=False, default=f"{vid}-{question_hash(text)}")
    return _lvbench_task(row, uid, media, stem, choices)


@register_dataset("dailyomni")
def dailyomni(row: Row, media_root: Any, media_template: str | list[str] | None = None, **_: Any) -> Task:
    """Daily-Omni (``qa.json``): a list of audio-visual multiple-choice questions.

    Fields: ``video_id``, ``Question``, ``Choice`` (["A. ...", ...]), ``Answer`` ("A".."D"), ``Type``
    (question category, e.g. "AV Event Alignment"), ``video_duration`` ("30s" | "60s"),
    ``content_parent_category`` (the literal "No content_parent_category provided" is no domain),
    ``content_fine_category``, ``video_category`` (YouTube's category). Media (first that exists):
    ``{video_id}/{video_id}_video.mp4``, ``Videos/{video_id}/{video_id}_video.mp4``, ``{video_id}.mp4``.
    The id is ``dailyomni-{video_id}-{hash of the question}`` (the release has no question id).
    """
    vid = str(get_field(row, "video_id"))
    question = str(get_field(row, "Question", "question"))
    choices = parse_options(row, get_field(row, "Choice", "choices", "options"))
    defaults = [f"{vid}/{vid}_video.mp4", f"Videos/{vid}/{vid}_video.mp4", f"{vid}.mp4"]
    cands = [format_template(t, row) for t in media_candidates(media_template, [])] or defaults
    return build_task(
        row,
        id=f"dailyomni-{get_field(row, 'id', 'qid', required=False, default=f'{vid}-{question_hash(question)}')}",
        media=first_existing_media(media_root, cands),
        question=question,
        task_type="mcq",
        choices=choices,
        answer=answer_letter(row, get_field(row, "Answer", "answer"), choices),
        source="dailyomni",
        extra={
            "category": get_field(row, "Type", "type", required=False),
            "duration_label": get_field(row, "video_duration", required=False),
            "domain": dailyomni_domain(row.data.get("content_parent_category")),
            "fine_category": get_field(row, "content_fine_category", required=False),
            "video_category": get_field(row, "video_category", required=False),
        },
    )


@register_dataset("worldsense")
def worldsense(
    row: Row, media_root: Any, media_template: str | list[str] | None = None, **_: Any
) -> list[Task]:
    """WorldSense (``worldsense_qa.json``): a dict keyed by video id, each holding ``task1``, ``task2``...

    Per video: ``video_id`` (else the dict key), ``duration``, ``domain``, ``sub_category``, and
    ``taskN`` = {``question``, ``candidates`` (["A. ...", ...]), ``answer`` ("A".."D"),
    ``task_domain``, ``task_type``}. Flat records (the lmms-eval parquet: ``video``/``video_id``,
    ``question``, ``candidates``, ``answer``, ``task_type``, ``task_domain``, ``index``) work too.
    Media: ``{video_id}.mp4`` (also ``videos/{video_id}.mp4``); lmms-eval's ``video_path`` first when given.
    """
    vid = str(get_field(row, "video_id", "video", "video_path", "_key"))
    vid = Path(vid).stem if vid.endswith(".mp4") else vid
    vp = row.data.get("video_path")
    defaults = ([str(vp)] if vp else []) + [f"{vid}.mp4", f"videos/{vid}.mp4"]
    data = {**row.data, "video_id": vid}
    cands = [
        format_template(t, Row(data, row.where)) for t in media_candidates(media_template, [])
    ] or defaults
    media = first_existing_media(media_root, cands)
    if "question" in row.data:
        qid = get_field(row, "index", "id", required=False, default=question_hash(str(row.data["question"])))
        items = [(str(qid), row)]
    else:
        keys = sorted((k for k in row.data if re.fullmatch(r"task\d+", str(k))), key=lambda k: int(k[4:]))
        if not keys:
            raise RowError(row.where, "no 'question' field and no 'task1', 'task2', ... entries")
        items = []
        for k in keys:
            if not isinstance(row.data[k], dict):
                raise RowError(f"{row.where} {k}", "each taskN entry must be an object")
            items.append((k, Row(row.data[k], f"{row.where} {k}")))
    tasks = []
    for suffix, sub in items:
        choices = parse_options(sub, get_field(sub, "candidates", "options"))
        tasks.append(
            build_task(
                sub,
                id=f"worldsense-{vid}-{suffix}",
                media=media,
                question=str(get_field(sub, "question")),
                task_type="mcq",
                choices=choices,
                answer=answer_letter(sub, get_field(sub, "answer"), choices),
                source="worldsense",
                extra={
                    "category": get_field(sub, "task_type", required=False),
                    "task_domain": get_field(sub, "task_domain", required=False),
                    "domain": row.data.get("domain"),
                },
            )
        )
    return tasks


LONGVALE_QUESTION = (
    'When does the following happen in the video: "{sentence}"? Give the interval [start, end] in seconds.'
)


@register_dataset("longvale")
def longvale(
    row: Row,
    media_root: Any,
    media_template: str | list[str] | None = None,
    question_template: str = LONGVALE_QUESTION,
    **_: Any,
) -> list[Task]:
    """LongVALE temporal grounding (ActivityNet-Captions style ``{video_id: {...}}`` JSON).

    Per video: ``duration`` (seconds), ``timestamps`` ([[start, end], ...]) and ``sentences`` (one
    omni-modal event caption per timestamp). Each (sentence, span) becomes one ``tr`` task whose
    answer is ``[[start, end]]``; spans running past ``duration`` are clipped to it (recorded in
    ``extra.clipped``). Media: ``{video_id}.mp4`` (also ``videos/{video_id}.mp4``).
    """
    vid = str(get_field(row, "video_id", "_key"))
    data = {**row.data, "video_id": vid}
    defaults = [f"{vid}.mp4", f"videos/{vid}.mp4"]
    cands = [
        format_template(t, Row(data, row.where)) for t in media_candidates(media_template, [])
    ] or defaults
    media = first_existing_media(media_root, cands)
    try:
        duration = float(get_field(row, "duration"))
    except (TypeError, ValueError):
        raise RowError(row.where, f"duration must be a number, got {row.data.get('duration')!r}") from None
    spans, sentences = get_field(row, "timestamps"), get_field(row, "sentences")
    if not isinstance(spans, list) or not isinstance(sentences, list) or len(spans) != len(sentences):
        raise RowError(row.where, "'timestamps' and 'sentences' must be lists of the same length")
    tasks = []
    for i, (span, sentence) in enumerate(zip(spans, sentences, strict=True)):
        where = f"{row.where} [{i}]"
        if not isinstance(span, list | tuple) or len(span) != 2:
            raise RowError(where, f"timestamp must be [start, end], got {span!r}")
        try:
            start, end = float(span[0]), float(span[1])
        except (TypeError, ValueError):
            raise RowError(where, f"timestamp bounds must be numbers, got {span!r}") from None
        clipped = end > duration
        end = min(end, duration)
        tasks.append(
            build_task(
                Row({}, where),
                id=f"longvale-{vid}-{i}",
                media=media,
                question=question_template.format(sentence=str(sentence).strip()),
                task_type="tr",
                answer=[[start, end]],
                evidence=[[start, end]],
                source="longvale",
                duration=duration,
                extra={"category": "temporal_grounding", "sentence": sentence, "clipped": clipped},
            )
        )
    return tasks


VSI_NUMERIC = {
    "object_counting": "num",
    "object_abs_distance": "num",
    "object_size_estimation": "size",
    "room_size_estimation": "size",
}


@register_dataset("vsibench")
def vsibench(row: Row, media_root: Any, media_template: str | list[str] | None = None, **_: Any) -> Task:
    """VSI-Bench (``test-*.parquet`` / ``test.jsonl``): spatial questions about indoor scene videos.

    Fields: ``id`` (int), ``dataset`` ("arkitscenes" | "scannet" | "scannetpp"), ``scene_name``,
    ``question_type``, ``question``, ``options`` (["A. ...", ...] or null), ``ground_truth`` (a number as
    text for numeric types, else a letter). Numeric types become ``num`` (object_counting,
    object_abs_distance) or ``size`` (object_size_estimation, room_size_estimation) tasks scored by
    MRA; the rest are mcq. Media: ``{dataset}/{scene_name}.mp4`` (also ``{scene_name}.mp4``). lmms-eval's
    export has no ``id``: the id is then ``{dataset}-{scene_name}-{hash of type and question}``.
    """
    scene = str(get_field(row, "scene_name"))
    qtype = str(get_field(row, "question_type"))
    defaults = [f"{row.data.get('dataset', '')}/{scene}.mp4", f"{scene}.mp4"]
    cands = [format_template(t, row) for t in media_candidates(media_template, [])] or defaults
    truth = get_field(row, "ground_truth", "answer")
    choices = None
    if qtype in VSI_NUMERIC:
        kind = VSI_NUMERIC[qtype]
        try:
            answer: Any = float(str(truth).strip())
        except ValueError:
            raise RowError(row.where, f"{qtype} ground_truth must be a number, got {truth!r}") from None
    else:
        kind = "mcq"
        choices = parse_options(row, get_field(row, "options"))
        answer = answer_letter(row, truth, choices)
    return build_task(
        row,
        id=f"vsibench-{_vsi_id(row, qtype, scene)}",
        media=first_existing_media(media_root, cands),
        question=str(get_field(row, "question")),
        task_type=kind,
        choices=choices,
        answer=answer,
        source="vsibench",
        extra={"category": qtype, "dataset": row.data.get("dataset")},
    )


def _vsi_id(row: Row, qtype: str, scene: str) -> str:
    if row.data.get("id") not in (None, ""):
        return str(row.data["id"])
    return f"{row.data.get('dataset', '')}-{scene}-{question_hash(qtype + ' ' + str(get_field(row, 'question')))}"


@register_dataset("synthetic", per_row=False)
def synthetic(
    files: list[Path],
    media_root: Any = None,
    out_dir: str | None = None,
    seed: int = 0,
    n_videos: int = 2,
    durations: list[float] | tuple[float, ...] = (60.0, 600.0),
    mode: str = "video",
    config: dict[str, Any] | None = None,
    split: str = "test",
    progress: bool = False,
    **_: Any,
) -> Produced:
    """The synthetic long-media benchmark of :mod:`envs.synth`, generated (or reused) in ``out_dir``.

    Deterministic in (``seed``, ``n_videos``, ``durations``, ``mode``, ``config``); files whose
    sidecar hash matches are reused. Annotation files, if given, are ignored. ``progress``: a bar while
    media are built (scripts/eval.py passes its ``progress`` setting).
    """
    from envs.synth import generate_benchmark

    target = out_dir or media_root
    if target is None:
        raise DatasetError("the synthetic dataset needs out_dir (where to write media and tasks)")
    tasks = generate_benchmark(
        os.path.expanduser(str(target)),
        seed=int(seed),
        n_videos=int(n_videos),
        durations=[float(d) for d in durations],
        mode=mode,  # type: ignore[arg-type]
        config=dict(config or {}),
        split=split,
        progress=bool(progress),
    )
    where = str(Path(os.path.expanduser(str(target))) / "tasks.jsonl")
    return [(f"{where}:{i + 1}", t) for i, t in enumerate(tasks)]
