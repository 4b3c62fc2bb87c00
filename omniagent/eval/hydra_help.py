"""The evaluation commands' hydra config folder and their ``--help``.

``conf/`` also holds the training configs (``rl``, ``sft``); hydra's own help would list those groups
under ``omniagent-eval --help``. ``conf/eval.yaml`` therefore writes its help template with the resolver
registered here, ``${omniagent_groups:benchmarks,protocol}``, which lists only the groups named (read
from the folder, so a new preset shows up without editing the template). Importing this module
registers the resolver; the eval entry points import it before hydra starts.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

__all__ = ["CONF_DIR", "config_groups"]

CONF_DIR = str(Path(__file__).resolve().parents[2] / "conf")  # the repository's hydra configs


def config_groups(*names: str) -> str:
    """``group: option, option`` lines for the named config groups of ``conf/``."""
    lines = []
    for name in names:
        options = sorted(p.stem for p in (Path(CONF_DIR) / name).glob("*.yaml"))
        lines.append(f"{name}: {', '.join(options)}")
    return "\n".join(lines)


OmegaConf.register_new_resolver("omniagent_groups", config_groups, replace=True)
