"""Exercise 12's budget draw, against the live JAX: the residual bytes of segment
checkpointing fall exactly where the draw assumes (one level per segment count), so a drawn
budget singles out one answer."""

import jax
import numpy as np

from grader.exercises.ex12_remat.judges import answer_candidates, budget_for, draw_model, segment_counts
from grader.exercises.ex12_remat import probes as probe
from grader.sandbox.context import to_jax


def _levels(depth, width=8, batch=4):
    params, x, y = to_jax(list(draw_model(np.random.default_rng(depth), depth=depth, width=width, batch=batch)))
    with jax.numpy_rank_promotion("allow"):
        return {k: probe.measure(lambda p, a, b: probe._segmented_loss(p, a, b, k), params, x, y)
                for k in range(depth + 1)}


def test_segment_levels_follow_the_segment_count():
    for depth in (4, 5, 7):
        levels = _levels(depth)
        counts = segment_counts(depth)
        assert levels[depth] < levels[1] < levels[0]  # whole < per block < no remat
        for k in range(2, depth + 1):
            if counts[k] == counts[k - 1]:
                assert levels[k] == levels[k - 1]
            else:
                assert levels[k] < levels[k - 1]
        for target in answer_candidates(depth):
            budget = budget_for(levels, target, 0.5)
            fits = [k for k in range(1, depth + 1) if levels[k] <= budget]
            assert fits[0] == target < depth


# --- several budgets, one diagnosis ------------------------------------------------------------
import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402

from grader.exercises.ex12_remat import judges  # noqa: E402
from grader.feedback import CheckFailed  # noqa: E402


@pytest.fixture(autouse=True)
def _rank_promotion_allowed():
    """The model adds a bias f32[d] to f32[B, d], as learners write it (the tests' config raises)."""
    with jax.numpy_rank_promotion("allow"):
        yield


def test_every_drawn_budget_singles_out_its_answer_and_the_last_gap_is_one_activation():
    for depth in (5, 6, 7):
        levels = _levels(depth)
        assert levels[depth - 1] - levels[depth] == 4 * 8 * 4  # one activation: batch 4 x width 8, float32
        for seed in range(20):
            for target, where in judges.draw_budgets(np.random.default_rng(seed), depth):
                budget = judges.budget_for(levels, target, where)
                assert min(k for k in range(1, depth + 1) if levels[k] <= budget) == target


def _answers(levels, budgets, depth, pick):
    return [pick([k for k in range(1, depth + 1) if levels[k] <= b], [k for k in range(1, depth + 1) if levels[k] < b])
            for b in budgets]


def test_choices_name_the_mistake():
    depth, levels = 5, _levels(5)
    act = levels[2] - levels[3]
    budgets = [judges.budget_for(levels, 2, 0.5), judges.budget_for(levels, 3, 0.5), levels[3]]
    right = _answers(levels, budgets, depth, lambda fits, _: fits[0])
    judges.judge_choices(right, budgets, levels, depth, hidden=True)
    strict = _answers(levels, budgets, depth, lambda _, under: under[0] if under else depth)
    with pytest.raises(CheckFailed, match="keeps exactly the budget"):
        judges.judge_choices(strict, budgets, levels, depth, hidden=True)
    estimate = [min((k for k in range(1, depth + 1) if levels[k] + act - 4 <= b), default=depth) for b in budgets]
    with pytest.raises(CheckFailed, match="so does the smaller segment size 3") as failure:
        judges.judge_choices(estimate, budgets, levels, depth, hidden=True)
    assert "do not estimate" in failure.value.hint
    with pytest.raises(CheckFailed, match="does not fit"):
        judges.judge_choices([1, 1, 1], budgets, levels, depth, hidden=True)


# --- what only a jaxpr shows ---------------------------------------------------------------------
class _Ctx:
    def __init__(self, **functions):
        self.functions = functions

    def function(self, name):
        return self.functions[name]

    def attribute(self, name):
        return self.functions[name]  # KeyError: a LookupError, as the sandbox's MissingFunction


def _run(ps, h):
    for p in ps:
        h = jnp.tanh(h @ p["w"] + p["b"])
    return h


def _head(h, y):
    return 0.5 * jnp.mean(jnp.sum((h - y) ** 2, axis=-1))


def _segmented(head_inside=None):
    def remat_loss(params, x, y, segment):
        starts = list(range(0, len(params), segment))
        h = x
        for s in starts[:-1]:
            h = jax.checkpoint(_run)(params[s:s + segment], h)
        last = params[starts[-1]:]
        if head_inside == "operand":
            return jax.checkpoint(lambda ps, h, y: _head(_run(ps, h), y))(last, h, y)
        if head_inside == "closure":
            return jax.checkpoint(lambda ps, h: _head(_run(ps, h), y))(last, h)
        if head_inside == "copy_of_y":  # a value computed from y carries it too
            return jax.checkpoint(lambda ps, h, t: _head(_run(ps, h), t))(last, h, y + 0.0)
        if head_inside == "glued":  # y concatenated onto the activations, sliced off inside
            w = h.shape[-1]
            return jax.checkpoint(lambda ps, hy: _head(_run(ps, hy[..., :w]), hy[..., w:]))(
                last, jnp.concatenate([h, y], axis=-1))
        if head_inside == "jitted":
            return jax.jit(lambda ps, h, y: jax.checkpoint(lambda a, b, c: _head(_run(a, b), c))(ps, h, y))(last, h, y)
        h = jax.checkpoint(_run)(last, h)
        if head_inside == "own_checkpoint":  # the head checkpointed apart from the blocks: still outside them
            return jax.checkpoint(_head)(h, y)
        return _head(h, y)
    return remat_loss


@pytest.mark.parametrize("how, inside", [(None, False), ("own_checkpoint", False), ("operand", True),
                                         ("closure", True), ("jitted", True), ("copy_of_y", True), ("glued", True)])
def test_head_inside_is_read_from_the_traced_vjp_whose_bytes_and_values_are_judged(how, inside):
    params, x, y = draw_model(np.random.default_rng(0), depth=5, width=8, batch=4)
    ctx = _Ctx(remat_loss=_segmented(how))
    got = probe.remat_traced(ctx, params, x, y, [1, 2, 5])
    assert [g["head_inside"] for g in got] == [inside] * 3
    eager = [probe.measure(lambda p, a, b, k=k: _segmented(how)(p, a, b, k), *to_jax([params, x, y]))
             for k in (1, 2, 5)]
    assert [g["bytes"] for g in got] == eager  # traced residuals are the statement's eager ones
    want = probe.reference_value_and_grad(ctx, params, x, y)
    for g in got:
        assert np.isclose(g["loss"], want["loss"], rtol=1e-5)
        np.testing.assert_allclose(np.asarray(g["grads"][0]["w"]), np.asarray(want["grads"][0]["w"]), rtol=1e-4,
                                   atol=1e-6)


def test_a_remat_loss_that_tells_the_tracers_apart_shows_its_head_in_the_one_trace():
    """A function that puts the head inside a checkpoint except when traced without a JVP
    around it (what the structure reading once was) shows the head in the one program."""
    honest, inside = _segmented(None), _segmented("closure")

    def remat_loss(params, x, y, segment):
        if not isinstance(x, jax.core.Tracer) or type(x).__name__ == "DynamicJaxprTracer":
            return honest(params, x, y, segment)
        return inside(params, x, y, segment)

    params, x, y = draw_model(np.random.default_rng(0), depth=5, width=8, batch=4)
    got = probe.remat_traced(_Ctx(remat_loss=remat_loss), params, x, y, [1, 2, 5])
    assert [g["head_inside"] for g in got] == [True] * 3


def _step(grad_of, donate=(0, 1)):
    def train_step(params, momentum, x, y, lr, beta):
        value, grads = jax.value_and_grad(grad_of)(params, x, y)
        momentum = jax.tree.map(lambda m, g: beta * m + g, momentum, grads)
        return jax.tree.map(lambda p, m: p - lr * m, params, momentum), momentum, value
    return jax.jit(train_step, donate_argnums=donate)


def _sized(sizes_of):
    """A remat_loss whose checkpoints hold ``sizes_of(depth, segment)`` consecutive blocks each."""
    def remat_loss(params, x, y, segment):
        h, start = x, 0
        for size in sizes_of(len(params), segment):
            h = jax.checkpoint(_run)(params[start:start + size], h)
            start += size
        return _head(h, y)
    return remat_loss


def _named_boundaries(params, x, y, segment):
    """One checkpoint around every block, saving the segments' inputs by name: the same segments."""
    from jax.ad_checkpoint import checkpoint_name

    def body(ps, h):
        for i, p in enumerate(ps):
            h = _run([p], checkpoint_name(h, "boundary") if i % segment == 0 else h)
        return h
    return _head(jax.checkpoint(body, policy=jax.checkpoint_policies.save_only_these_names("boundary"))(params, x), y)


def _uneven(depth, segment):  # as many segments, of one block each but the last
    count = -(-depth // segment)
    return [1] * (count - 1) + [depth - (count - 1)]


def _short_first(depth, segment):
    first = depth % segment or segment
    return [first] + [segment] * ((depth - first) // segment)


@pytest.mark.parametrize("remat_loss, wrong", [
    (_segmented(), False), (_named_boundaries, False),
    (_sized(lambda depth, k: [min(k, depth - s) for s in range(0, depth, k)]), False),
    (_sized(_uneven), True), (_sized(_short_first), True)])
def test_segments_are_judged_by_where_they_begin_not_by_their_number(remat_loss, wrong):
    """Segments of [1, 1, 3] blocks (5 blocks, segment 2) or the shorter one first ([1, 2, 2]) keep
    as many checkpoints and residual bytes as [2, 2, 1]: the residuals' values say which blocks' inputs
    are kept, whatever the idiom (a names policy in one checkpoint keeps the same ones)."""
    params, x, y = draw_model(np.random.default_rng(1), depth=5, width=8, batch=5)
    segments = [1, 2, 4, 5]
    got = probe.remat_traced(_Ctx(remat_loss=remat_loss), params, x, y, segments)
    want = probe.reference_bytes(None, params, x, y, segments)
    judges.judge_remat_bytes([g["bytes"] for g in got], want, segments, 5, hidden=True)  # the bytes cannot tell
    residuals = [g["residuals"] for g in got]
    if not wrong:
        judges.judge_segments_kept(residuals, params, x, segments, 5)
        return
    with pytest.raises(CheckFailed, match="does not checkpoint consecutive segments of 2") as failure:
        judges.judge_segments_kept(residuals, params, x, segments, 5)
    assert "[0, 2, 4]" in failure.value.expected


def test_step_structure_wants_remat_loss_and_no_callback():
    params, x, y = draw_model(np.random.default_rng(0), depth=4, width=8, batch=4)
    momentum = jax.tree.map(np.zeros_like, params)
    plain_loss = lambda p, a, b: _head(_run(p, a), b)  # noqa: E731
    loss, grads = jax.value_and_grad(plain_loss)(*to_jax([params, x, y]))
    ref = {"loss": np.asarray(loss), "grads": jax.tree.map(np.asarray, grads)}

    def judge(step):
        facts = probe.step_primitives(_Ctx(train_step=step), params, momentum, x, y, 0.1, 0.9)
        judges.judge_step_structure(facts, params, momentum, 0.1, 0.9, ref)

    judge(_step(lambda p, a, b: _segmented()(p, a, b, 2)))
    with pytest.raises(CheckFailed, match="does not differentiate remat_loss"):
        judge(_step(plain_loss))

    plain_vg = jax.jit(jax.value_and_grad(plain_loss))

    def host(params, momentum, x, y, lr, beta):
        def numpy_step(p, m, a, b, lr, beta):
            value, g = plain_vg(p, a, b)
            m = jax.tree.map(lambda mi, gi: beta * mi + np.asarray(gi), m, g)
            return jax.tree.map(lambda pi, mi: pi - lr * mi, p, m), m, np.asarray(value, np.float32)
        shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), (params, momentum))
        return jax.pure_callback(numpy_step, (*shapes, jax.ShapeDtypeStruct((), jnp.float32)),
                                 params, momentum, x, y, lr, beta)
    with pytest.raises(CheckFailed, match="host callback"):
        judge(jax.jit(host))


def test_step_structure_is_judged_on_the_program_the_calls_run():
    """A Python function that hands tracers the remat step and steps on the plain loss when
    called on arrays (red team 2, attack 12) is refused: only jax.jit's own function traces
    its body on every call; and a traced program whose numbers are not the step's is refused
    before its structure is read."""
    params, x, y = draw_model(np.random.default_rng(0), depth=4, width=8, batch=4)
    momentum = jax.tree.map(np.zeros_like, params)
    loss, grads = jax.value_and_grad(lambda p, a, b: _head(_run(p, a), b))(*to_jax([params, x, y]))
    ref = {"loss": np.asarray(loss), "grads": jax.tree.map(np.asarray, grads)}
    remat = _step(lambda p, a, b: _segmented()(p, a, b, 2))
    plain = _step(lambda p, a, b: _head(_run(p, a), b))

    def two_faced(params, momentum, x, y, lr, beta):
        if isinstance(x, jax.core.Tracer):
            return remat(params, momentum, x, y, lr, beta)
        return plain(params, momentum, x, y, lr, beta)

    facts = probe.step_primitives(_Ctx(train_step=two_faced), params, momentum, x, y, 0.1, 0.9)
    with pytest.raises(CheckFailed, match="not the function jax.jit returns"):
        judges.judge_step_structure(facts, params, momentum, 0.1, 0.9, ref)
    wrong = _step(lambda p, a, b: 2.0 * _segmented()(p, a, b, 2))
    facts = probe.step_primitives(_Ctx(train_step=wrong), params, momentum, x, y, 0.1, 0.9)
    with pytest.raises(CheckFailed) as err:
        judges.judge_step_structure(facts, params, momentum, 0.1, 0.9, ref)
    assert "traced" in err.value.diagnosis


def test_the_step_shows_the_head_and_policies_training_runs_whatever_the_grader_reads_under_vjp():
    """A remat_loss that tells jax.grad from jax.vjp by JAX's frames is judged in train_step's
    own trace: the head inside a segment, another policy, another number of segments or as many
    segments of other sizes than remat_loss(..., SEGMENT) has under jax.vjp."""
    import traceback

    params, x, y = draw_model(np.random.default_rng(0), depth=4, width=8, batch=4)
    momentum = jax.tree.map(np.zeros_like, params)
    loss, grads = jax.value_and_grad(lambda p, a, b: _head(_run(p, a), b))(*to_jax([params, x, y]))
    ref = {"loss": np.asarray(loss), "grads": jax.tree.map(np.asarray, grads)}

    def under_grad():
        return any(f.name in ("grad_f", "value_and_grad_f") for f in traceback.extract_stack())

    def head_inside(params, x, y, segment):
        return _segmented("closure" if under_grad() else None)(params, x, y, segment)

    def dots(params, x, y, segment):
        policy = jax.checkpoint_policies.dots_saveable if under_grad() else None
        h = x
        for start in range(0, len(params), segment):
            h = jax.checkpoint(_run, policy=policy)(params[start:start + segment], h)
        return _head(h, y)

    def one_per_block(params, x, y, segment):  # more segments, more activations kept, only in training
        return _segmented()(params, x, y, 1 if under_grad() else segment)

    def uneven(params, x, y, segment):  # as many segments, of other sizes, only in training
        return (_sized(_uneven) if under_grad() else _segmented())(params, x, y, segment)

    honest = _segmented()
    for remat_loss, wrong in ((honest, None), (head_inside, "runs the head"), (dots, "checkpoints differently"),
                              (one_per_block, "checkpoints differently"), (uneven, "hold other blocks")):
        ctx = _Ctx(remat_loss=remat_loss, SEGMENT=2, train_step=_step(lambda p, a, b, f=remat_loss: f(p, a, b, 2)))
        facts = probe.step_primitives(ctx, params, momentum, x, y, 0.1, 0.9)
        if wrong is None:
            judges.judge_step_structure(facts, params, momentum, 0.1, 0.9, ref)
            continue
        with pytest.raises(CheckFailed, match=wrong):
            judges.judge_step_structure(facts, params, momentum, 0.1, 0.9, ref)


def test_donated_args_show_a_donated_batch():
    from grader.probes import steps

    params, x, y = draw_model(np.random.default_rng(0), depth=2, width=8, batch=4)
    momentum = jax.tree.map(np.zeros_like, params)
    args = (params, momentum, x, y, 0.1, 0.9)
    loss = lambda p, a, b: _head(_run(p, a), b)  # noqa: E731
    assert steps.donated_args(steps.lower(_step(loss), args)) == [True, True, False, False, False, False]
    with pytest.warns(UserWarning, match="donated buffers were not usable"):  # JAX only warns
        assert steps.donated_args(steps.lower(_step(loss, (0, 1, 2, 3)), args))[2:4] == [True, True]
