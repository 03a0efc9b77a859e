"""Hidden checks for exercise 15: keys, layer sizes, inputs, rates and epochs drawn at grading time.

Every draw holds each case its check claims (``COVERAGE``; ``ensure`` checks it on every draw):
a typed key, the same key data as a legacy key, the same key again and another key; a low and
a high dropout rate and ``training=False``; batches of two and three dimensions.  What JAX
draws from a key comes from the clean worker (``ex15_prng:truth_*``), on the installed JAX, at
every grading.  Key reuse is judged both under ``jax.debug_key_reuse`` in the learner's process
and by value here, which the learner's process cannot switch off.

The structural checks of parts A and C reuse the draws of the value check beside them
(``check_rng``), so they measure the very calls that were shown right.
"""

import numpy as np

from grader.coverage import Coverage, check_rng, ensure
from grader.exercises.ex15_prng.judges import (
    _layers,
    draw_dropout_cases,
    draw_epoch,
    draw_key,
    draw_noise_cases,
    draw_sizes,
    dropout_labels,
    epoch_args,
    epoch_masks,
    first_epoch,
    init_calls,
    judge_dropout,
    judge_epoch_kinds,
    judge_epoch_values,
    judge_epoch_draws,
    judge_fresh_steps,
    judge_init_independent,
    judge_init_values,
    judge_noise,
    judge_noise_structure,
    noise_structure_cases,
    judge_returned_key,
    legacy_twin,
    mask_shape,
    size_labels,
)

KEY_CASES = {"typed_key", "legacy_key", "repeated_key"}


def init_case(rng):
    sizes = draw_sizes(rng)
    keys, labels = init_calls(rng)
    return sizes, keys, labels


def epoch_case(rng):
    return draw_epoch(rng, "typed")


def dropout_case(rng, seed):
    """Dropout inputs of the epoch's mask shape (one ``bernoulli`` compiled for both checks)."""
    return draw_dropout_cases(rng, mask_shape(epoch_case(check_rng(seed, "test_epoch_matches_its_masks"))))


COVERAGE = {
    "init_mlp_matches": Coverage(
        required=KEY_CASES | {"other_key", "fan_in_differs"},
        labels=lambda rng: (lambda c: set(c[2]) | size_labels(c[0]))(init_case(rng)), test="test_init_mlp_matches"),
    "dropout_matches": Coverage(
        required=KEY_CASES | {"training_false", "low_rate", "high_rate"},
        labels=lambda rng: dropout_labels(*draw_dropout_cases(rng)), test="test_dropout_matches"),  # any shape
    "noise_matches": Coverage(
        required=KEY_CASES, labels=lambda rng: set(draw_noise_cases(rng)[1]), test="test_noise_matches"),
}


# --- part A: init_mlp -------------------------------------------------------------------------------

def test_init_mlp_matches(submission, rng):
    sizes, keys, labels = init_case(rng)
    ensure("init_mlp_matches", COVERAGE["init_mlp_matches"].required, set(labels) | size_labels(sizes))
    judge_init_values(submission.probe("ex15_prng:init_values", keys, sizes), keys, labels, sizes)


def test_init_mlp_keys_independent(submission, truth, seed):
    sizes, keys, _ = init_case(check_rng(seed, "test_init_mlp_matches"))  # the calls shown right there
    got = submission.probe("ex15_prng:init_values", keys[:1], sizes)[0]
    layers = _layers(got.get("out"), sizes, "init_mlp(key, sizes)", "typed")
    root = truth.probe("ex15_prng:truth_bits", keys[0], max(m * n for m, n in zip(sizes[:-1], sizes[1:])))
    reuse = submission.probe("ex15_prng:key_reuse", "init_mlp", keys[0], sizes)
    judge_init_independent(layers, root, reuse, submission.probe("ex15_prng:init_draws", keys[0], sizes))


# --- part B: dropout --------------------------------------------------------------------------------

def test_dropout_matches(submission, truth, rng, seed):
    cases, labels = dropout_case(rng, seed)
    ensure("dropout_matches", COVERAGE["dropout_matches"].required, dropout_labels(cases, labels))
    got = submission.probe("ex15_prng:dropout_values", cases)
    judge_dropout(got, truth.probe("ex15_prng:truth_dropout", cases), cases, labels)


# --- part C: train_epoch ----------------------------------------------------------------------------

def _judged_epoch(submission, truth, case):
    got = submission.probe("ex15_prng:epoch_values", case["key"], *epoch_args(case))
    masks = epoch_masks(first_epoch(got, case["key"]["kind"]), case)
    want = truth.probe("ex15_prng:truth_epoch", *epoch_args(case)[:2], masks, *epoch_args(case)[2:], {})
    return got, judge_epoch_values(got, want, case)


def test_epoch_matches_its_masks(submission, truth, rng):
    case = epoch_case(rng)
    typed, _ = _judged_epoch(submission, truth, case)
    legacy, _ = _judged_epoch(submission, truth, {**case, "key": legacy_twin(case["key"])})
    judge_epoch_kinds(typed, legacy)


def test_epoch_fresh_key_per_step(submission, truth, seed):
    case = epoch_case(check_rng(seed, "test_epoch_matches_its_masks"))  # the epoch shown right there
    got = submission.probe("ex15_prng:epoch_values", case["key"], *epoch_args(case))
    masks = epoch_masks(first_epoch(got, "typed"), case)
    bits = truth.probe("ex15_prng:truth_epoch", *epoch_args(case)[:2], masks, *epoch_args(case)[2:],
                       {"input": case["key"]})["bits"]
    reuse = submission.probe("ex15_prng:key_reuse", "train_epoch", case["key"], *epoch_args(case), False)
    judge_fresh_steps(masks, bits["input"], reuse)
    judge_epoch_draws(masks, submission.probe("ex15_prng:epoch_draws", case["key"], *epoch_args(case)), case)


def test_epoch_returns_fresh_key(submission, truth, seed):
    case = epoch_case(check_rng(seed, "test_epoch_matches_its_masks"))
    got = submission.probe("ex15_prng:epoch_values", case["key"], *epoch_args(case))
    first = first_epoch(got, "typed")
    masks = epoch_masks(first, case)
    returned = first["key"]
    returned_bits = None
    if returned.get("kind") in ("typed", "legacy"):
        returned_bits = truth.probe("ex15_prng:truth_epoch", *epoch_args(case)[:2], masks, *epoch_args(case)[2:],
                                    {"returned": returned})["bits"]["returned"]
    one = submission.probe("ex15_prng:key_reuse", "train_epoch", case["key"], *epoch_args(case), False)
    two = submission.probe("ex15_prng:key_reuse", "train_epoch", case["key"], *epoch_args(case), True)
    judge_returned_key(got, masks, returned_bits, case, {} if "reuse" in one else two)  # a reuse inside one epoch
    # is epoch_fresh_key_per_step's


# --- part D: per_example_noise ----------------------------------------------------------------------

def test_noise_matches(submission, truth, rng):
    cases, labels = draw_noise_cases(rng)
    ensure("noise_matches", KEY_CASES, set(labels))
    got = submission.probe("ex15_prng:noise_values", cases)
    judge_noise(got, truth.probe("ex15_prng:truth_noise", cases), cases, labels,
                explain=lambda i: truth.probe("ex15_prng:truth_noise", cases[i:i + 1], True)[0])


def test_noise_one_draw_per_batch(submission, truth, rng):
    key = draw_key(rng, "typed")
    small, large = int(rng.integers(2, 4)), int(rng.integers(7, 11))
    width = int(rng.integers(2, 6))
    # structure and values from one trace: the program whose jaxpr is read must draw the reference noise
    judge_noise_structure(submission.probe("ex15_prng:noise_structure", key, [small, large], width),
                          truth.probe("ex15_prng:truth_noise", noise_structure_cases(key, [small, large], width)))
