import numpy as np

from grader.feedback import expect_array, expect_close
from grader.testing import expect_compiles


def test_doubles(submission, rng):
    x = rng.normal(size=int(rng.integers(2, 9))).astype(np.float32)
    expect_close(expect_array(submission.call("double", x), shape=x.shape), 2 * x)


def test_compiles_once(submission, rng, learner_names):
    # size 16: `test_doubles` never draws it, so its calls cannot have compiled this shape already
    calls = [{"args": [rng.normal(size=16).astype(np.float32)]} for _ in range(3)]
    record = submission.probe("generic:count_compiles", "double", calls)["compiles"]
    expect_compiles(record, learner_names, at_most=1)
    assert record["by_name"].get("double") == 1, "raw assertion text that must stay hidden"
