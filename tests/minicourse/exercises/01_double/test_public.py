import numpy as np

from grader.feedback import expect_array, expect_close


def test_doubles_public(submission, rng):
    x = rng.normal(size=3).astype(np.float32)
    expect_close(expect_array(submission.call("double", x), shape=(3,)), 2 * x, reveal=True)
