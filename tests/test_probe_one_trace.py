"""grader/probes/generic.py's ``traced_run``: the jaxpr and the values of one trace, so a function
that tells tracers from concrete arrays cannot show a check one program and compute with another
(red team 08: NumPy for concrete calls, a kernel for show to ``make_jaxpr``)."""

import jax
import jax.numpy as jnp
import numpy as np

from grader.probes import generic


def two_faced(x):
    if not isinstance(x, jax.core.Tracer):
        return np.asarray(x) * 2.0  # the right answer, on the host
    return jnp.sin(x)  # what a tracer sees


def test_values_are_those_of_the_traced_program():
    x = jnp.arange(4.0)
    run = generic.traced_run(two_faced, x)
    assert run.error is None
    assert [e.primitive.name for e in run.jaxpr.jaxpr.eqns] == ["sin"]
    np.testing.assert_allclose(np.asarray(run.outputs), np.sin(np.arange(4.0)), rtol=1e-6)


def test_errors_are_kept_with_the_stage_that_raised():
    run = generic.traced_run(lambda x: np.asarray(x) + 1, jnp.ones(3))  # NumPy on a tracer
    assert run.jaxpr is None and run.outputs is None and "Tracer" in type(run.error).__name__

    def bad_shape(x):
        return x  # traces fine
    ok = generic.traced_run(bad_shape, jnp.ones(3))
    assert ok.error is None and ok.jaxpr is not None


def test_the_summary_probe_reads_the_same_trace():
    class Ctx:
        def function(self, name):
            assert name == "f"
            return two_faced

    got = generic.jaxpr_and_values(Ctx(), "f", [np.arange(3, dtype=np.float32)])
    assert got["jaxpr"]["primitives"] == {"sin": 1}
    np.testing.assert_allclose(np.asarray(got["outputs"]), np.sin(np.arange(3.0)), rtol=1e-6)
