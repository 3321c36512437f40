"""``--segrobust-shard auto``: which shard this job is, read from its scheduler's environment.

A job scheduler that starts N copies of one job tells each copy which it is through environment
variables. ``--segrobust-shard auto`` reads them (``auto/N`` also gives the count, which a
Kubernetes Indexed Job does not pass to its pods) into the same :class:`ShardSpec` that
``--segrobust-shard K/N`` gives, with the variables it came from:

=========================  ========================  ==========================  ==========================
scheduler                  index                     count                       first index
=========================  ========================  ==========================  ==========================
Kubernetes Indexed Job     ``JOB_COMPLETION_INDEX``  none: ``auto/N``            0
Slurm job array            ``SLURM_ARRAY_TASK_ID``   ``SLURM_ARRAY_TASK_COUNT``  ``SLURM_ARRAY_TASK_MIN``
GitLab CI ``parallel: N``  ``CI_NODE_INDEX``         ``CI_NODE_TOTAL``           1
CircleCI ``parallelism``   ``CIRCLE_NODE_INDEX``     ``CIRCLE_NODE_TOTAL``       0
=========================  ========================  ==========================  ==========================

A Slurm array's ids run from ``SLURM_ARRAY_TASK_MIN`` in steps of ``SLURM_ARRAY_TASK_STEP``
(1 where unset): ``--array=3-6`` is shards 1 to 4. GitHub Actions passes no index: its matrix
value is given explicitly (``--segrobust-shard ${{ matrix.shard }}/4``).

Refused, as a usage error naming the variables: none set; a scheduler's variables half set
(when no other scheduler's are complete: GitLab sets ``CI_NODE_TOTAL=1`` in every job, so a
Slurm job started from a GitLab job still shards); a value that is not an integer; an index
outside the count; a count other than ``auto/N``'s; two schedulers that name different shards.

This module imports nothing heavy: the plugin reads ``--segrobust-shard`` with it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

from pytest_segrobust.backends.shard_plan import ShardSpec

AUTO = "auto"


@dataclass(frozen=True)
class Scheduler:
    """The environment variables by which a scheduler tells a job which of N copies it is.

    Attributes:
        name: The scheduler, as messages name it.
        index: The variable holding the job's index.
        count: The variable holding the number of jobs; ``None`` where the scheduler gives
            none (the count then comes from ``--segrobust-shard auto/N``).
        first: The index of the first job, where it is fixed.
        first_variable: The variable holding the first job's index, where it varies.
        step_variable: The variable holding the step between indices (1 where unset).
    """

    name: str
    index: str
    count: str | None
    first: int = 0
    first_variable: str | None = None
    step_variable: str | None = None

    @property
    def variables(self) -> tuple[str, ...]:
        """Every variable the scheduler sets for it, the index first."""
        named = (self.index, self.count, self.first_variable, self.step_variable)
        return tuple(name for name in named if name is not None)

    @property
    def required(self) -> tuple[str, ...]:
        """The variables without which the shard is unknown."""
        return tuple(name for name in (self.index, self.count, self.first_variable) if name is not None)


SCHEDULERS = (
    Scheduler("a Kubernetes Indexed Job", index="JOB_COMPLETION_INDEX", count=None, first=0),
    Scheduler(
        "a Slurm job array",
        index="SLURM_ARRAY_TASK_ID",
        count="SLURM_ARRAY_TASK_COUNT",
        first_variable="SLURM_ARRAY_TASK_MIN",
        step_variable="SLURM_ARRAY_TASK_STEP",
    ),
    Scheduler("a GitLab CI job with parallel:", index="CI_NODE_INDEX", count="CI_NODE_TOTAL", first=1),
    Scheduler("a CircleCI job with parallelism", index="CIRCLE_NODE_INDEX", count="CIRCLE_NODE_TOTAL", first=0),
)


def parse_shard(text: str) -> ShardSpec:
    """``--segrobust-shard``'s value: ``K/N``, ``auto`` or ``auto/N``; an ``argparse`` type.

    Raises:
        argparse.ArgumentTypeError: for a malformed value, or an ``auto`` the environment
            cannot answer (naming the variables found and missing, and their scheduler).
    """
    word, slash, count = text.strip().partition("/")
    if word != AUTO:
        return ShardSpec.parse(text)
    given = None
    if slash:
        given = int(count) if count.strip().isdigit() else 0
        if given < 1:
            raise argparse.ArgumentTypeError(f"expected auto or auto/N with N >= 1 (e.g. auto/4), got {text!r}")
    return from_environment(os.environ, given)


def from_environment(environ: Mapping[str, str], count: int | None = None) -> ShardSpec:
    """The shard the scheduler's variables in ``environ`` name (see the module's table).

    Args:
        environ: The environment (``os.environ``).
        count: N of ``auto/N``: the count where the scheduler gives none, checked where it does.

    Returns:
        The shard, with ``source``: the variables it was read from and their scheduler.

    Raises:
        argparse.ArgumentTypeError: none set, half set, not integers, an index out of range,
            a count other than ``count``, or two schedulers naming different shards.
    """
    found: list[ShardSpec] = []
    partial: list[str] = []
    for scheduler in SCHEDULERS:
        values = {name: environ[name].strip() for name in scheduler.variables if environ.get(name, "").strip()}
        if not values:
            continue
        missing = [name for name in scheduler.required if name not in values]
        if missing or (scheduler.count is None and count is None):
            partial.append(_half_set(scheduler, values, missing))
            continue
        found.append(_shard(scheduler, values, count))
    if not found:
        if partial:
            raise argparse.ArgumentTypeError(f"auto: {'; '.join(partial)}")
        listed = "; ".join(f"{', '.join(s.required)} ({s.name})" for s in SCHEDULERS)
        raise argparse.ArgumentTypeError(
            f"auto: no scheduler's variables are set: it reads {listed}; "
            "elsewhere (GitHub Actions) give the shard as K/N, e.g. --segrobust-shard ${{ matrix.shard }}/4"
        )
    first = found[0]
    for other in found[1:]:
        if other != first:
            raise argparse.ArgumentTypeError(
                f"auto: two schedulers name different shards: {first.described()} and {other.described()}; "
                "unset one's variables or give the shard as K/N"
            )
    if len(found) > 1:
        return replace(first, source="; ".join(spec.source for spec in found))
    return first


def _half_set(scheduler: Scheduler, values: Mapping[str, str], missing: list[str]) -> str:
    """Why a scheduler's variables do not name a shard: some missing, or no count given."""
    shown = ", ".join(f"{name}={value}" for name, value in values.items())
    if missing:
        return (
            f"{shown} set but {', '.join(missing)} not ({scheduler.name}): "
            "its variables are only half set; give the shard as K/N instead"
        )
    return (
        f"{shown} set ({scheduler.name}), which gives no count of shards: "
        "give it as --segrobust-shard auto/N, N the Job's completions"
    )


def _shard(scheduler: Scheduler, values: Mapping[str, str], given: int | None) -> ShardSpec:
    """The shard a scheduler's complete variables name."""
    numbers: dict[str, int] = {}
    for name, value in values.items():
        try:
            numbers[name] = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"auto: {name}={value!r} ({scheduler.name}): expected an integer"
            ) from None
    shown = ", ".join(f"{name}={value}" for name, value in numbers.items())
    source = f"from {shown}, {scheduler.name}"
    count = given if scheduler.count is None else numbers[scheduler.count]
    assert count is not None  # from_environment asks for auto/N where the scheduler gives no count
    if given is not None and count != given:
        raise argparse.ArgumentTypeError(
            f"auto/{given}: {scheduler.count}={count} ({scheduler.name}) says {count} shards"
        )
    first = scheduler.first if scheduler.first_variable is None else numbers[scheduler.first_variable]
    step = numbers.get(scheduler.step_variable, 1) if scheduler.step_variable else 1
    position, off_step = divmod(numbers[scheduler.index] - first, max(step, 1))  # Slurm's step is >= 1
    if count < 1:
        raise argparse.ArgumentTypeError(f"auto: {shown} ({scheduler.name}): expected at least one shard")
    if off_step or not 0 <= position < count:
        ids = f"{first} to {first + (count - 1) * step}" + (f" in steps of {step}" if step != 1 else "")
        raise argparse.ArgumentTypeError(
            f"auto: {shown} ({scheduler.name}): {scheduler.index} is not one of the {count} shards' indices, {ids}"
        )
    return ShardSpec(position + 1, count, source=source)
