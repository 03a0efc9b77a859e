"""grader/probes/steps.py: what a learner's jitted step is and did, read so that no
attribute the learner sets can change it (exercises 7 and 12's donation and report checks)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from grader.probes import steps


def _step(p, s, x):
    return jax.tree.map(lambda a: a * 0.5, p), jax.tree.map(lambda a: a + 1.0, s), jnp.sum(x)


def _inputs():
    p = [{"w": jnp.ones((4, 3)), "b": jnp.zeros(3) + 1.0}]
    return p, jax.tree.map(lambda a: a + 2.0, p), jnp.ones((5, 4))


donating = partial(jax.jit, donate_argnums=(0, 1))(_step)
plain = jax.jit(_step)


def by_hand(p, s, x):  # deletes its inputs itself: the look of donation without it
    out = plain(p, s, x)
    for leaf in jax.tree.leaves((p, s)):
        leaf.delete()
    return out


by_hand.lower = donating.lower


def test_only_what_jax_jit_returns_is_jitted_and_its_own_lower_is_used():
    assert steps.is_jitted(donating) and not steps.is_jitted(by_hand)
    assert steps.lower(by_hand, _inputs()) is None
    decoy = jax.jit(_step)
    decoy.lower = jax.jit(lambda p, s, x: (p, s, x[0, 0])).lower  # an instance attribute: never called
    lowered = steps.lower(decoy, _inputs())
    assert lowered is not None and steps.runs_as_lowered(decoy, lowered.compile(), _inputs())


def test_a_lowering_of_another_program_is_seen():
    other = jax.jit(lambda p, s, x: (p, s, jnp.max(x))).lower(*_inputs()).compile()
    assert not steps.runs_as_lowered(plain, other, _inputs())


def test_reuse_of_the_donated_buffers_is_read_from_their_addresses():
    for fn, reused in ((donating, True), (plain, False), (by_hand, False)):
        p, s, x = _inputs()
        before = steps.pointers((p, s))
        out = jax.block_until_ready(fn(p, s, x))
        assert (steps.reused_bytes(out, before) > 0) is reused, fn
    assert np.asarray(donating(*_inputs())[2]) == 20.0
