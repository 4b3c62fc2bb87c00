"""A deterministic synthetic long-media task engine: evidence known by construction.

The engine composes a long video (or audio file) from distinct background segments and inserts short
events at times it chooses, so every answer and every evidence interval follows from the construction
itself, with no annotation. This is the "temporal data engine" idea (compose segments, insert
anomalies into a known window) made fully synthetic, cheap and exactly reproducible from a seed.

Timeline (all times in seconds; visual events sit on the frame grid ``k / fps``):

- background segments: a solid colour or a gradient of dim, low-saturation colours, plus a quiet
  low-frequency hum (different per segment) and faint noise in the audio;
- visual events: a saturated coloured shape (square / circle / triangle), a large digit, a short word,
  a white flash, a burst of TV static (with a noise burst in the audio too);
- audio events: tone bursts ("beeps") of known frequency, spoken words (espeak-ng; when espeak-ng is
  missing the words are replaced by beeps and no speech questions are asked), and a beep followed
  shortly by a shape (for "what appears right after the beep" questions).

Events never overlap: the timeline is cut into equal slots and each slot holds one event group.

Every video frame carries its own index as a barcode in the bottom rows (see :func:`decode_frame_index`),
so consumers can check that the frame they got is the frame they asked for.

Media are written by piping raw frames to an ``ffmpeg`` subprocess (libx264 + AAC); PyAV is used when
the ``ffmpeg`` binary is missing. Audio-only mode writes wav, flac or mp3.

CLI: ``python -m envs.synth --out DIR --seed 0 --n 4 --durations 60,600``.

Modules: :mod:`~envs.synth.config` (vocabulary, :class:`SynthConfig`), :mod:`~envs.synth.barcode`,
:mod:`~envs.synth.glyphs` (font, shapes), :mod:`~envs.synth.speech` (espeak-ng),
:mod:`~envs.synth.timeline` (segments and events), :mod:`~envs.synth.render` (frames, soundtrack),
:mod:`~envs.synth.encode` (ffmpeg / PyAV), :mod:`~envs.synth.tasks` (task templates),
:mod:`~envs.synth.generate` (caching, benchmark) and :mod:`~envs.synth.cli`. Everything public is
re-exported here; import it from ``envs.synth``.
"""

from envs.synth.barcode import (
    BARCODE_BITS,
    BARCODE_BLOCKS,
    MAX_FRAME_INDEX,
    MIN_VIDEO_WIDTH,
    BarcodeError,
    barcode_height,
    decode_frame_index,
    draw_frame_index,
)
from envs.synth.cli import main
from envs.synth.config import (
    AUDIO_KINDS,
    GENERATOR_VERSION,
    HUM_FREQS,
    MAX_DISTINCT_SPOKEN,
    MIN_SLOT_SECONDS,
    NEEDS_AUDIO_KINDS,
    SCREEN_WORDS,
    SHAPE_COLORS,
    SHAPES,
    SLOT_MARGIN,
    SOURCE_NAME,
    SPOKEN_WORDS,
    TONE_FREQS,
    VIDEO_KINDS,
    VISUAL_ONLY_KINDS,
    EventKind,
    Level,
    SynthConfig,
)
from envs.synth.encode import FRAME_CHUNK
from envs.synth.generate import SynthResult, config_hash, generate_benchmark, synthesize, video_seed
from envs.synth.glyphs import FONT, shape_mask, text_bitmap
from envs.synth.levels import build_timeline, make_tasks
from envs.synth.render import AUDIO_BLOCK_SECONDS, render_audio, render_frames
from envs.synth.search import (
    SEARCH_COLORS,
    SEARCH_DIGITS,
    SEARCH_PITCHES,
    SEARCH_TEMPLATES,
    build_search_timeline,
    make_search_tasks,
)
from envs.synth.speech import speech_backend
from envs.synth.timeline import Event, Segment, Timeline

__all__ = [
    "AUDIO_BLOCK_SECONDS",
    "AUDIO_KINDS",
    "BARCODE_BITS",
    "BARCODE_BLOCKS",
    "FONT",
    "FRAME_CHUNK",
    "GENERATOR_VERSION",
    "Level",
    "HUM_FREQS",
    "MAX_DISTINCT_SPOKEN",
    "MAX_FRAME_INDEX",
    "MIN_SLOT_SECONDS",
    "MIN_VIDEO_WIDTH",
    "NEEDS_AUDIO_KINDS",
    "SCREEN_WORDS",
    "SEARCH_COLORS",
    "SEARCH_DIGITS",
    "SEARCH_PITCHES",
    "SEARCH_TEMPLATES",
    "SHAPES",
    "SHAPE_COLORS",
    "SLOT_MARGIN",
    "SOURCE_NAME",
    "SPOKEN_WORDS",
    "TONE_FREQS",
    "VIDEO_KINDS",
    "VISUAL_ONLY_KINDS",
    "BarcodeError",
    "Event",
    "EventKind",
    "Segment",
    "SynthConfig",
    "SynthResult",
    "Timeline",
    "barcode_height",
    "build_search_timeline",
    "build_timeline",
    "config_hash",
    "decode_frame_index",
    "draw_frame_index",
    "generate_benchmark",
    "main",
    "make_search_tasks",
    "make_tasks",
    "render_audio",
    "render_frames",
    "shape_mask",
    "speech_backend",
    "synthesize",
    "text_bitmap",
    "video_seed",
]
