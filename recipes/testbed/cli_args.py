"""Values the testbed's commands share on their command lines: a labelled folder, ``LABEL=DIR``.

Each is an argparse ``type``: ``p.add_argument("--eval", type=labelled, action="append")`` gives a list of
``(label, folder)`` pairs, and a value that is not one is refused with the option's name, before anything runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def labelled(spec: str) -> tuple[str, Path]:
    """``LABEL=DIR`` as ``(label, folder)``, split at the first ``=`` (a folder may hold one); refused without a
    label or a folder."""
    label, sep, folder = spec.partition("=")
    if not sep or not label or not folder:
        raise argparse.ArgumentTypeError(f"{spec!r}: expected LABEL=DIR")
    return label, Path(folder)


def maybe_labelled(spec: str) -> tuple[str, Path]:
    """``[LABEL=]DIR``: as :func:`labelled`, or without ``=`` the folder labelled by its own name."""
    if "=" not in spec:
        return Path(spec).name, Path(spec)
    return labelled(spec)
