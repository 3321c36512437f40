"""The demo's referring data and model: unique deterministic expressions, a real trained text-conditioned model."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable
from importlib import resources

import pytest
import torch

from pytest_segrobust.data.demo import DemoScenes, generate_scene
from pytest_segrobust.data.demo_referring import (
    EXPRESSION_VERSION,
    NOUN,
    POSITION_MARGIN,
    SIZE_RATIO,
    DemoReferring,
    SceneObject,
    _may_be_colour,
    colour_name,
    demo_referring_dataset,
    scene_objects,
)
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.models import adapt_model
from pytest_segrobust.models.demo_referring import TinyReferringNet, tiny_referring, words_of
from pytest_segrobust.tasks import get_task
from pytest_segrobust.text import TEXT_PERTURBATIONS


@pytest.fixture(scope="module")
def val() -> DemoReferring:
    return demo_referring_dataset("val")


# Digest of the val split's ids and expressions (first 16 hex digits of sha256).
PINNED_DIGEST = "070c04ae82635cec"


def test_expressions_and_ids_are_deterministic_and_stable(val: DemoReferring) -> None:
    again = DemoReferring("val")
    assert again.sample_ids == val.sample_ids and again.expressions == val.expressions
    assert len(set(val.sample_ids)) == len(val) and 64 <= len(val) <= 128
    assert (val[0].sample_id, val[0].referring.expression) == ("demo/val/00000/2/0", "the bottommost checkered shape")
    # A change here changes every stored demo referring baseline: bump EXPRESSION_VERSION with the digest.
    digest = hashlib.sha256("\n".join(f"{i}\t{e}" for i, e in zip(val.sample_ids, val.expressions)).encode())
    assert (EXPRESSION_VERSION, digest.hexdigest()[:16]) == ("1", PINNED_DIGEST)
    # A prefix of the scenes gives a prefix of the samples, with the same ids.
    fewer = DemoReferring("val", scenes=3)
    assert fewer.sample_ids == val.sample_ids[: len(fewer)]
    assert val.name == "demo-referring-val" and "scenes=10" in val.fingerprint()
    assert val.fingerprint() != fewer.fingerprint() != DemoReferring("train", scenes=3).fingerprint()


def test_samples_carry_their_scene_and_the_object_mask(val: DemoReferring) -> None:
    scenes = DemoScenes("val", size=val.scenes)
    for index in range(0, len(val), 7):
        sample = val[index]
        _, _, scene, number, _ = sample.sample_id.split("/")
        assert torch.equal(sample.image, scenes[int(scene)].image)
        mask = sample.referring.mask
        assert mask.dtype == torch.bool and mask.shape == sample.image.shape[1:]
        assert torch.equal(mask, torch.from_numpy(generate_scene("val", int(scene)).objects == int(number)))
        assert int(mask.sum()) >= 60
    with pytest.raises(IndexError):
        val[len(val)]


def _place_key(word: str) -> Callable[[SceneObject], float]:
    return {
        "leftmost": lambda o: o.x,
        "rightmost": lambda o: -o.x,
        "topmost": lambda o: o.y,
        "bottommost": lambda o: -o.y,
    }[word]


def _satisfies(obj: SceneObject, words: list[str], objects: list[SceneObject]) -> bool | None:
    """Whether ``obj`` is what ``words`` (one noun phrase, without "the") describe; ``None`` where it is unclear."""
    *modifiers, noun = words
    assert noun == NOUN
    textures = {"striped", "checkered", "dotted", "smooth"}
    texture = next((w for w in modifiers if w in textures), None)
    pool = [o for o in objects if texture is None or o.texture == texture]
    if obj not in pool:
        return False
    for word in modifiers:
        if word in textures:
            continue
        if word in {"leftmost", "rightmost", "topmost", "bottommost"}:
            key = _place_key(word)
            others = [o for o in pool if o is not obj]
            if any(key(o) <= key(obj) - POSITION_MARGIN for o in others):
                return False  # clearly beaten
            if any(key(o) < key(obj) + POSITION_MARGIN for o in others):
                return None
        elif word in {"largest", "smallest"}:
            others = [o for o in pool if o is not obj]
            bigger = [o.area / obj.area for o in others] if word == "smallest" else [obj.area / o.area for o in others]
            if any(ratio <= 1 / SIZE_RATIO for ratio in bigger):
                return False  # clearly beaten
            if any(ratio < SIZE_RATIO for ratio in bigger):
                return None
        else:  # a colour
            if colour_name(obj) == word:
                continue
            return None if _may_be_colour(obj, word) else False
    return True


def _referents(expression: str, objects: list[SceneObject]) -> list[SceneObject]:
    """The objects an independent reading of ``expression`` allows (clearly or possibly)."""
    words = expression.split()
    assert words[0] == "the"
    for relation in ("left of", "right of", "above", "below"):
        head, found, anchor_words = expression[4:].partition(f" {relation} the ")
        if not found:
            continue
        anchors = [o for o in objects if _satisfies(o, anchor_words.split(), objects) is not False]
        assert len(anchors) == 1, expression
        anchor = anchors[0]
        axis, sign = {"left of": ("x", -1), "right of": ("x", 1), "above": ("y", -1), "below": ("y", 1)}[relation]
        allowed = []
        for obj in objects:
            if obj is anchor or _satisfies(obj, head.split(), objects) is False:
                continue
            offset = sign * (getattr(obj, axis) - getattr(anchor, axis))
            if offset > -POSITION_MARGIN:  # holds, or too close to call
                allowed.append(obj)
        return allowed
    return [o for o in objects if _satisfies(o, words[1:], objects) is not False]


@pytest.mark.parametrize("split", ["val", "train"])
def test_every_expression_names_its_object_and_no_other(split: str) -> None:
    dataset = DemoReferring(split, scenes=12)
    by_scene: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for sample_id, expression in zip(dataset.sample_ids, dataset.expressions, strict=True):
        _, _, scene, number, _ = sample_id.split("/")
        by_scene[int(scene)].append((int(number), expression))
    assert len(by_scene) >= 10
    for scene, described in by_scene.items():
        objects = scene_objects(dataset.scene(scene))
        per_object: dict[int, list[str]] = defaultdict(list)
        for number, expression in described:
            referents = _referents(expression, objects)
            assert [o.number for o in referents] == [number], (split, scene, expression)
            per_object[number].append(expression)
        assert all(1 <= len(e) <= 3 and len(set(e)) == len(e) for e in per_object.values())


def test_words_survive_punctuation_and_case() -> None:
    assert words_of("The D-otted, shape!") == ["the", "dotted", "shape"]
    assert words_of("  ...  ") == [""]


def test_the_packaged_weights_are_small_and_load_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    weights = resources.files("pytest_segrobust.models") / "weights" / "tiny_referring.pt"
    assert weights.is_file() and len(weights.read_bytes()) <= 2 * 1024 * 1024

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("the demo model must not download anything")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", no_download)
    monkeypatch.setattr(torch.hub, "download_url_to_file", no_download)
    model = tiny_referring()
    assert isinstance(model, TinyReferringNet) and not model.training


@pytest.fixture(scope="module")
def referring_model() -> object:
    return adapt_model(tiny_referring(), get_task("referring"), device="cpu")


def test_the_demo_referring_model_is_really_trained(referring_model: object, val: DemoReferring) -> None:
    result = evaluate(
        referring_model,
        val,
        settings=EvalSettings.of(
            task="referring", metrics=["referring_miou", "referring_p50"], limit=32, batch_size=16
        ),
    )
    assert result.metrics["referring_miou"].score >= 45 and result.metrics["referring_p50"].score >= 45


@pytest.mark.parametrize("name", ["misspelling", "mispunctuation", "grammar_error", "character_missing"])
def test_perturbed_and_odd_texts_still_give_masks(referring_model: object, val: DemoReferring, name: str) -> None:
    samples = [val[i] for i in range(4)]
    texts = [s.referring.expression for s in samples]
    perturbed = TEXT_PERTURBATIONS.get(name).perturb(texts, [s.sample_id for s in samples], severity=5, seed=0)
    perturbed += ["", "!!!", "ünïcode ßhape " * 20, "the"]
    # The texts are the check: a quarter of the image (its top-left 64x64) is enough to segment.
    images = torch.stack([samples[0].image[:, :64, :64]] * len(perturbed)).float() / 255
    masks = referring_model.predict(images, perturbed)  # type: ignore[attr-defined]
    assert masks.dtype == torch.bool and masks.shape == (len(perturbed), *images.shape[-2:])


def test_predictions_do_not_depend_on_the_batch(referring_model: object, val: DemoReferring) -> None:
    samples = [val[i] for i in (0, 9, 30, 31)]
    images = torch.stack([s.image for s in samples]).float() / 255
    texts = [s.referring.expression for s in samples]
    together = referring_model.predict(images, texts)  # type: ignore[attr-defined]
    one_by_one = torch.cat([referring_model.predict(images[i : i + 1], texts[i : i + 1]) for i in range(4)])  # type: ignore[attr-defined]
    assert torch.equal(together, one_by_one)


def test_an_image_without_objects_gives_an_empty_mask(referring_model: object) -> None:
    blank = torch.full((2, 3, 40, 56), 0.5)
    masks = referring_model.predict(blank, ["the dotted shape", "the leftmost shape"])  # type: ignore[attr-defined]
    assert masks.shape == (2, 40, 56) and not masks.any()
