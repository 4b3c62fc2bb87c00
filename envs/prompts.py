"""Every piece of text the environment shows the model. Written for omniagent; kept in one place so
prompt changes are reviewable and SFT data can be regenerated when they change."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envs.scoring import get_scorer, letters

if TYPE_CHECKING:
    from envs.limits import EnvLimits
    from envs.media import MediaInfo

SYSTEM_PROMPT = """\
You answer a question about a long {kind} that you cannot see all at once. You look at it piece by \
piece: each turn you ask for a few frames, a stretch of audio or a short clip, and the next message \
shows you exactly that. Raw media stays in view for ONE turn only; afterwards it is replaced by a \
short note saying what was shown and when. Whatever you want to remember you must write down in \
your "observation" at the turn you see it.

Each turn, reply with exactly one JSON object and nothing else (no code fences, no extra text):
{{"observation": "...", "thought": "...", "action": {{...}}}}
- observation: what the latest media showed that matters for the question, with times in seconds \
(write "none" on the first turn). Be specific: text on screen, counts, colours, words heard.
- thought: what you know so far, what is still missing, and why the next action helps.
- action: one of
{actions}
  {{"type": "answer", "content": ...}}: final answer, which ends the episode. Format: {answer_format}.

Times are absolute seconds from the start of the file, from 0 to {duration:.2f}. Every frame is \
labelled with its exact time; use those times, not guesses. Spans outside the file are trimmed to \
it. A strategy that works: scan widely first, then zoom into short windows around what matters. \
You have {max_turns} turns in total, and the last one must be an answer."""

ACTION_LINES = {
    "get_frames": '  {{"type": "get_frames", "start": s, "end": e, "num": n}}: n frames (1 to {max_frames}) '
    "spread evenly from s to e.",
    "get_audio": '  {{"type": "get_audio", "start": s, "end": e}}: the sound from s to e (at most {max_audio_s:g} s).',
    "get_clip": '  {{"type": "get_clip", "start": s, "end": e}}: a short clip, frames at {clip_fps:g} fps with '
    "its sound, from s to e (at most {max_clip_s:g} s).",
}


def available_actions(info: MediaInfo) -> list[str]:
    acts = []
    if info.has_video:
        acts.append("get_frames")
    if info.has_audio:
        acts.append("get_audio")
    if info.has_video:
        acts.append("get_clip")
    return acts


def system_prompt(info: MediaInfo, task_type: str, limits: EnvLimits, max_turns: int) -> str:
    lines = [ACTION_LINES[a].format(**limits.model_dump()) for a in available_actions(info)]
    return SYSTEM_PROMPT.format(
        kind="video" if info.has_video else "audio recording",
        actions="\n".join(lines),
        answer_format=get_scorer(task_type, option_text=limits.mcq_option_text).format_hint,
        duration=info.duration,
        max_turns=max_turns,
    )


def question_prompt(question: str, choices: list[str] | None, info: MediaInfo) -> str:
    facts = [f"duration {info.duration:.2f} s"]
    if info.has_video:
        facts.append(f"{info.fps:.3g} fps" if info.fps else "frame rate unknown")
        facts.append(f"{info.width}x{info.height}")
    facts.append("has audio" if info.has_audio else "no audio track")
    if not info.has_video:
        facts.append("no video stream (audio only)")
    text = f"Media: {', '.join(facts)}.\nQuestion: {question}"
    if choices:
        text += "\nOptions:\n" + "\n".join(option_lines(choices))
    return text


def option_lines(choices: list[str]) -> list[str]:
    """The question's option lines, ``A. red`` and so on, in the order given."""
    return [f"{letter}. {c}" for letter, c in zip(letters(len(choices)), choices, strict=True)]


def turn_notice(turn: int, max_turns: int) -> str:
    """``turn`` is the number of the turn the model is about to take (1-based)."""
    left = max_turns - turn
    if left == 0:
        return f"[Turn {turn} of {max_turns}. This is your last turn: you must answer now.]"
    return f"[Turn {turn} of {max_turns}; {left} more after this one.]"


def is_turn_notice(text: str) -> bool:
    """Whether a text part is a :func:`turn_notice` (readers that drop it must not guess its form)."""
    return text.lstrip().startswith("[Turn ")


def fmt_times(times: list[float]) -> str:
    return "[" + ", ".join(f"{t:.2f}s" for t in times) + "]"


def purged_stub(action: str, start: float, end: float, times: list[float], observation_turn: int) -> str:
    """What replaces a percept's raw media once the model has had its turn to describe it."""
    if action == "get_frames":
        what = f"Frames {start:.2f}s-{end:.2f}s (num={len(times)}). Timestamps: {fmt_times(times)}"
    elif action == "get_audio":
        what = f"Audio {start:.2f}s-{end:.2f}s ({end - start:.2f} s)"
    else:
        what = f"Clip {start:.2f}s-{end:.2f}s, frame timestamps: {fmt_times(times)}"
    return f"{what} [MEDIA REMOVED - see your observation in turn {observation_turn}]"


def error_percept(code: str, message: str) -> str:
    return f"ERROR ({code}): {message} Nothing was retrieved; this turn still counted."


def adjusted_note(notes: list[str]) -> str:
    return "Note: " + " ".join(notes) if notes else ""
