"""Public checks for exercise 15 (run by `grade exercise 15`; they carry no points).

Fixed, readable inputs: the key data [0, 42] (what jax.random.key(42) holds) as a typed key, as a
legacy PRNGKey and again, and [0, 7] as another key; layer sizes [32, 64, 16]; dropout on
x = 1, 1.01, 1.02, ... with rates 0.25 and 0.75 and with training=False; a two-layer MLP trained
for 4 batches of 16 examples (32 hidden units) at rate 0.25; noise on xs = 0, 1, ..., 11 as a (4, 3)
batch.  What JAX draws from each key comes from a clean JAX process.  The hidden checks test the
same properties on inputs drawn at grading time.
"""

import numpy as np

from grader.exercises.ex15_prng.judges import (
    epoch_masks,
    first_epoch,
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
)

KEY = {"data": np.uint32([0, 42]), "kind": "typed"}
OTHER = {"data": np.uint32([0, 7]), "kind": "legacy"}


def test_init_mlp_small(submission, truth):
    sizes = [32, 64, 16]
    keys, labels = [KEY, legacy_twin(KEY), dict(KEY), OTHER], ["typed_key", "legacy_key", "repeated_key", "other_key"]
    layers = judge_init_values(submission.probe("ex15_prng:init_values", keys, sizes), keys, labels, sizes)[0]
    judge_init_independent(layers, truth.probe("ex15_prng:truth_bits", KEY, 32 * 64),
                           submission.probe("ex15_prng:key_reuse", "init_mlp", KEY, sizes),
                           submission.probe("ex15_prng:init_draws", KEY, sizes))


def test_dropout_small(submission, truth):
    x = (1.0 + 0.01 * np.arange(128, dtype=np.float32)).reshape(8, 16)
    cases = [{"key": KEY, "x": x, "rate": 0.25, "training": True},
             {"key": OTHER, "x": x, "rate": 0.75, "training": True},
             {"key": dict(KEY), "x": x, "rate": 0.25, "training": True},
             {"key": KEY, "x": x, "rate": 0.5, "training": False}]
    labels = ["typed_key", "legacy_key", "repeated_key", "training_false"]
    got = submission.probe("ex15_prng:dropout_values", cases)
    judge_dropout(got, truth.probe("ex15_prng:truth_dropout", cases), cases, labels)


def _epoch_case() -> dict:
    rng = np.random.default_rng(15)  # fixed: the same epoch every time
    params = [{"w": (rng.normal(size=(3, 32)) / np.sqrt(3)).astype(np.float32), "b": np.zeros(32, np.float32)},
              {"w": (rng.normal(size=(32, 1)) / np.sqrt(32)).astype(np.float32), "b": np.zeros(1, np.float32)}]
    batches = [(rng.normal(size=(16, 3)).astype(np.float32), rng.normal(size=(16, 1)).astype(np.float32))
               for _ in range(4)]  # masks of 512 units: two steps thresholding one key's bits are told by chance
    return {"params": params, "batches": batches, "rate": 0.25, "lr": 0.1, "key": KEY}


def test_train_epoch_small(submission, truth):
    case = _epoch_case()
    args = (case["params"], case["batches"], case["rate"], case["lr"])
    runs = {}
    for key in (KEY, legacy_twin(KEY)):
        got = submission.probe("ex15_prng:epoch_values", key, *args)
        masks = epoch_masks(first_epoch(got, key["kind"]), case)
        keys = {"input": KEY} | ({"returned": got["first"]["key"]}
                                 if got["first"]["key"].get("kind") in ("typed", "legacy") else {})
        want = truth.probe("ex15_prng:truth_epoch", *args[:2], masks, *args[2:], keys)
        judge_epoch_values(got, want, {**case, "key": key})
        runs[key["kind"]] = (got, masks, want["bits"])
    judge_epoch_kinds(runs["typed"][0], runs["legacy"][0])
    got, masks, bits = runs["typed"]
    one = submission.probe("ex15_prng:key_reuse", "train_epoch", KEY, *args, False)
    judge_fresh_steps(masks, bits["input"], one)
    judge_epoch_draws(masks, submission.probe("ex15_prng:epoch_draws", KEY, *args), case)
    two = submission.probe("ex15_prng:key_reuse", "train_epoch", KEY, *args, True)
    judge_returned_key(got, masks, bits.get("returned"), case, two)


def test_per_example_noise_small(submission, truth):
    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    cases = [{"key": KEY, "xs": xs}, {"key": OTHER, "xs": xs}, {"key": dict(KEY), "xs": xs}]
    got = submission.probe("ex15_prng:noise_values", cases)
    judge_noise(got, truth.probe("ex15_prng:truth_noise", cases), cases, ["typed_key", "legacy_key", "repeated_key"],
                explain=lambda i: truth.probe("ex15_prng:truth_noise", cases[i:i + 1], True)[0])
    # structure and values from one trace: the program whose jaxpr is read must draw the reference noise
    judge_noise_structure(submission.probe("ex15_prng:noise_structure", KEY, [2, 9], 3),
                          truth.probe("ex15_prng:truth_noise", noise_structure_cases(KEY, [2, 9], 3)))
