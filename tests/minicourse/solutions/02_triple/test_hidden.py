import numpy as np

from grader.feedback import expect_array, expect_close


def test_triples(submission, rng):
    x = rng.normal(size=5).astype(np.float32)
    expect_close(expect_array(submission.call("triple", x), shape=(5,)), 3 * x)
