"""The local trainer's progress bar: it moves once per rollout group, so a long iteration shows its pace and an
ETA instead of sitting at ``0/1`` until the whole iteration is done (``local.progress``)."""

from __future__ import annotations

from typing import Any

from tqdm import tqdm


class GroupProgress:
    """A tqdm bar over rollout groups: ``data.train_batch_size`` per iteration, ``local.iterations`` iterations.

    :meth:`group_done` advances it by one played group (tqdm's rate and ETA follow); :meth:`iteration_done`
    names the iteration's reward and turns, and when dynamic sampling (``algorithm.filter_groups``) played more
    groups than the iteration keeps, grows the total by the extra ones so the ETA stays honest."""

    def __init__(self, iterations: int, groups_per_iteration: int, start: int, enabled: bool = True) -> None:
        self.per_iteration = groups_per_iteration
        self.bar = tqdm(
            total=iterations * groups_per_iteration,
            initial=start * groups_per_iteration,
            unit="group",
            desc=f"iteration {start + 1}/{iterations}",
            disable=not enabled,
        )
        self.iterations, self.iteration = iterations, start

    def group_done(self) -> None:
        self.bar.update(1)

    def iteration_done(self, row: dict[str, Any]) -> None:
        """After iteration ``row["iteration"]``: its metrics in the bar, the total grown by any extra groups."""
        extra = int(row.get("groups_played", self.per_iteration)) - self.per_iteration
        if extra > 0:
            self.bar.total += extra
        self.iteration = int(row["iteration"])
        if self.iteration < self.iterations:
            self.bar.set_description(f"iteration {self.iteration + 1}/{self.iterations}", refresh=False)
        self.bar.set_postfix(reward=f"{row['reward_mean']:.3f}", turns=f"{row['turns']:.1f}")

    def close(self) -> None:
        self.bar.close()
