"""A cell cut into pieces: consecutive ranges of its samples, evaluated apart, merged exactly.

A large cell can be spread over several workers (``--segrobust-ray-split``): the first
``limit`` samples are cut into ``count`` consecutive ranges at multiples of the batch size
(:func:`piece_range`), each worker
evaluates its range and sends back its metrics' states (:class:`Piece`), and one of them merges
the states in sample order through the reductions the metrics declare
(:meth:`~pytest_segrobust.metrics.base.Metric.merge`: ``SUM`` states added, ``CONCAT`` states
extended). Every sample is evaluated once: no padding, no duplicate, unlike
``torch.utils.data.DistributedSampler``.

The merged result is the unsplit one, because nothing a sample contributes depends on where it
is evaluated: its corruption is seeded by the run's seed, its id, the corruption and the
severity (:func:`~pytest_segrobust.randomness.seeding.sample_seed`), its metric records are numbered by
its position in the dataset, not in the piece, and its batch is the one it has unsplit (for a
dataset of one image size; with several sizes the batches can differ, which changes the last
bits of a model whose output depends on its batch's size). Integer states (confusion matrices, COCO's
records) merge to the same bits; a floating-point ``SUM`` state (panoptic quality's IoU sums)
is added in another order, so it can differ in its last bits.

Nothing here needs Ray: the backend moves :class:`Piece` objects, this module makes and merges them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_segrobust.corruptions import Corruption
from pytest_segrobust.data.base import SegmentationDataset
from pytest_segrobust.engine.evaluation import (
    NO_HOOKS,
    EvalHooks,
    EvalResult,
    EvalSettings,
    accumulate,
    result_of,
    sample_count,
)
from pytest_segrobust.metrics import METRICS, MetricContext


@dataclass(frozen=True)
class Piece:
    """What one range of a cell's samples left in its metrics, free of any device.

    Attributes:
        start: The range's first sample position.
        stop: One past its last (``start == stop``: a piece of a dataset smaller than the count).
        states: Each metric's :meth:`~pytest_segrobust.metrics.base.Metric.state_dict`, by name,
            in the suite's order (the headline first).
        seconds: Wall time of the piece's evaluation.
        cache_counts: What the worker built and computed for it (model builds...), for the run's counts.
        image_scores: The headline score of each of its samples on its own, among the first
            ``scored_images`` of the whole (:attr:`~pytest_segrobust.engine.evaluation.EvalResult.image_scores`).
    """

    start: int
    stop: int
    states: dict[str, dict[str, Any]]
    seconds: float
    cache_counts: dict[str, int] = field(default_factory=dict)
    image_scores: tuple[float, ...] = ()


@dataclass(frozen=True)
class Split:
    """How a worker evaluates a split cell: it takes the first of ``count`` pieces and ``others``
    hands it the rest, in order, evaluated elsewhere meanwhile."""

    count: int
    others: Callable[[], Sequence[Piece]]


def piece_range(total: int, index: int, count: int, block: int = 1) -> range:
    """The ``index``-th of ``count`` consecutive ranges that cut ``range(total)`` at multiples of ``block``.

    Cut at multiples of the batch size, a piece's batches are the unsplit evaluation's (when
    its images share one size), so a model whose output depends on its batch's size in the
    last bits (CPU convolutions do) predicts the same bits. The pieces' numbers of blocks
    differ by one at most, the larger first; with fewer blocks than pieces the last are empty.

    Raises:
        ValueError: for an index outside ``0..count-1`` or a block below 1.
    """
    if not 0 <= index < count:
        raise ValueError(f"piece {index} of {count}: expected an index from 0 to {count - 1}")
    if block < 1:
        raise ValueError(f"pieces cut at multiples of {block}: expected a block of 1 sample or more")
    size, extra = divmod(-(-total // block), count)
    first = index * size + min(index, extra)
    return range(min(first * block, total), min((first + size + (index < extra)) * block, total))


def evaluate_piece(
    model: Any,
    dataset: SegmentationDataset,
    corruption: Corruption | None,
    severity: int,
    index: int,
    count: int,
    settings: EvalSettings,
    hooks: EvalHooks = NO_HOOKS,
) -> Piece:
    """Evaluate piece ``index`` of ``count`` of what :func:`~pytest_segrobust.engine.evaluation.evaluate`
    evaluates under the same settings, and keep its metrics' states. The pieces are cut at
    multiples of ``batch_size`` (:func:`piece_range`).

    Raises:
        DatasetError: for a dataset without samples (as the whole evaluation does), or a bad sample.
        ModelOutputError: for predictions of the wrong type, shape, dtype or class range.
    """
    start = time.perf_counter()
    positions = piece_range(sample_count(dataset, settings.limit), index, count, settings.batch_size)
    scorers, image_scores = accumulate(model, dataset, corruption, severity, positions, settings, hooks)
    states = {scorer.name: scorer.state_dict() for scorer in scorers}
    return Piece(positions.start, positions.stop, states, time.perf_counter() - start, image_scores=image_scores)


def merge_pieces(
    pieces: Sequence[Piece], total: int, context: MetricContext, *, statistics: bool, seconds: float
) -> EvalResult:
    """The result of the whole from its pieces, merged in sample order through the metrics' reductions.

    Args:
        pieces: Every piece of one evaluation, in order.
        total: How many samples the whole evaluates (:func:`~pytest_segrobust.engine.evaluation.sample_count`):
            the pieces must cover exactly ``0..total-1``, so a piece lost on the way fails the
            cell instead of scoring it on fewer samples.
        context: The dataset's metric context, on the device the metrics compute on.
        statistics: Keep each metric's per-image statistics (concatenated in sample order); the
            first images' scores on their own are concatenated likewise.
        seconds: The wall time to report for the whole.

    Raises:
        ValueError: when the pieces do not cut ``0..total-1`` into consecutive ranges (a gap, an
            overlap, a piece out of order, a missing last piece), or disagree on the metrics.
    """
    if not pieces:
        raise ValueError("no piece to merge")
    names = list(pieces[0].states)
    expected = 0
    for number, piece in enumerate(pieces):
        if piece.start != expected or piece.stop < piece.start:
            raise ValueError(
                f"piece {number} covers samples {piece.start}..{piece.stop - 1}, expected it to start at {expected}: "
                "the pieces must cut the samples into consecutive ranges, each sample once"
            )
        if list(piece.states) != names:
            raise ValueError(f"piece {number} has metrics {list(piece.states)}, piece 0 has {names}")
        expected = piece.stop
    if expected != total:
        raise ValueError(
            f"the pieces cover samples 0..{expected - 1}, the evaluation has {total}: "
            "a piece is missing, and a cell is never scored on part of its samples"
        )
    scorers = [METRICS.get(name)(context) for name in names]
    for piece in pieces:
        for scorer in scorers:
            part = type(scorer)(context)
            part.load_state_dict(piece.states[scorer.name])
            scorer.merge(part)
    image_scores = tuple(score for piece in pieces for score in piece.image_scores)
    return result_of(scorers, expected, seconds, statistics=statistics, image_scores=image_scores)
