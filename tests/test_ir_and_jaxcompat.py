"""jaxpr/HLO helpers and every version-sensitive pattern, checked against the live JAX."""

import logging

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from grader import ir, jaxcompat


def test_installed_jax_is_a_tested_version():
    assert jax.__version__ in jaxcompat.TESTED_JAX


def test_log_patterns_match_the_live_compile_log():
    records = []

    class H(logging.Handler):
        def emit(self, r):
            records.append(r.getMessage())

    h = H()
    loggers = [logging.getLogger(n) for n in jaxcompat.COMPILE_LOGGERS]
    for lg in loggers:
        lg.addHandler(h)
    try:
        with jax.log_compiles(True):
            jax.jit(lambda x: x + 1)(jnp.zeros((2, 3)))
    finally:
        for lg in loggers:
            lg.removeHandler(h)
    finished = [m for r in records if (m := jaxcompat.COMPILE_FINISHED.search(r))]
    started = [m for r in records if (m := jaxcompat.COMPILE_STARTED.search(r))]
    assert "<lambda>" in [m.group("name") for m in finished]
    assert any("float32[2,3]" in m.group("sig") for m in started)


def test_monitoring_event_name_and_fun_name():
    seen = []

    def listener(event, duration, **kw):
        seen.append((event, kw.get("fun_name")))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        def monitored_fn(x):
            return x * 3
        jax.jit(monitored_fn)(jnp.zeros(3))
    finally:
        jaxcompat.unregister_duration_listener(listener)
    names = [jaxcompat.backend_compile_name(f) for e, f in seen if e == jaxcompat.BACKEND_COMPILE_EVENT]
    assert "monitored_fn" in names


def test_primitive_counts_descend_into_every_sub_jaxpr():
    @jax.jit
    def inner(x):
        return jnp.sin(x)

    def f(x):
        y = inner(x)
        y = jax.nn.relu(y)  # custom_jvp_call
        y, _ = lax.scan(lambda c, _: (c * 2.0, None), y, None, length=3)
        return lax.cond(y.sum() > 0, lambda v: v + 1.0, lambda v: v - 1.0, y)

    counts = ir.primitive_counts(jax.make_jaxpr(f)(jnp.ones(3)))
    assert counts[jaxcompat.NESTED_CALL_PRIMITIVES[0]] >= 1
    assert counts["sin"] == 1 and counts["scan"] == 1 and counts["cond"] == 1
    assert counts["custom_jvp_call"] == 1
    assert counts["add"] >= 1 and counts["sub"] >= 1  # both cond branches are walked
    summary = ir.jaxpr_summary(jax.make_jaxpr(f)(jnp.ones(3)))
    assert summary["total_eqns"] == sum(counts.values())
    assert summary["out_avals"] == ["float32[3]"]


def test_where_is_a_nested_call_holding_select_n():
    closed = jax.make_jaxpr(lambda c, a, b: jnp.where(c, a, b))(jnp.array([True]), jnp.ones(1), jnp.zeros(1))
    assert closed.jaxpr.eqns[0].primitive.name in jaxcompat.NESTED_CALL_PRIMITIVES
    assert ir.primitive_counts(closed).get("select_n") == 1


def _tiled_matmul(x, w, bm, bn, bk, relu_outside=False):
    """A 3-D-grid Pallas matmul in interpret mode (the only mode a CPU runs)."""
    from jax.experimental import pallas as pl

    def kernel(x_ref, w_ref, o_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += x_ref[...] @ w_ref[...]

    out = pl.pallas_call(kernel, grid=(x.shape[0] // bm, w.shape[1] // bn, x.shape[1] // bk),
                         in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                                   pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
                         out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
                         out_shape=jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), jnp.float32), interpret=True)(x, w)
    return jnp.maximum(out, 0.0) if relu_outside else out


def test_pallas_call_facts_read_grid_blocks_and_vmap():
    from jax.experimental import pallas as pl

    x, w = np.ones((8, 12), np.float32), np.ones((12, 6), np.float32)
    closed = jax.make_jaxpr(jax.jit(lambda a, b: _tiled_matmul(a, b, 4, 3, 6, relu_outside=True)))(x, w)
    found = ir.kernel_calls(closed)
    assert found["calls"] == [{"grid": [2, 2, 2], "blocks": [[4, 6], [6, 3], [4, 3]], "num_inputs": 2,
                               "num_outputs": 1, "interpret": True}]
    assert found["outside"].get("max") == 1 and "dot_general" not in found["outside"]  # the kernel's body is not walked
    assert found["outside"].get(jaxcompat.NESTED_CALL_PRIMITIVES[0]) == 1
    # vmap adds a leading grid axis; the batched operands' blocks gain a squeezed dimension
    batched = jax.make_jaxpr(jax.vmap(lambda a, b: _tiled_matmul(a, b, 4, 3, 6), in_axes=(0, None)))(np.stack([x] * 3), w)
    assert ir.kernel_calls(batched)["calls"] == [{"grid": [3, 2, 2, 2], "blocks": [[None, 4, 6], [6, 3], [None, 4, 3]],
                                                  "num_inputs": 2, "num_outputs": 1, "interpret": True}]
    assert ir.kernel_calls(batched)["outside"] == {}
    # a None in a BlockSpec is a squeezed dimension too; a plain jnp program calls no kernel
    squeezed = jax.make_jaxpr(lambda a: pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(Ellipsis, x_ref[...] * 2.0), grid=(8,),
        in_specs=[pl.BlockSpec((None, 12), lambda i: (i, 0))], out_specs=pl.BlockSpec((None, 12), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((8, 12), jnp.float32), interpret=True)(a))(x)
    assert ir.kernel_calls(squeezed)["calls"][0]["blocks"] == [[None, 12], [None, 12]]
    assert ir.kernel_calls(jax.make_jaxpr(lambda a, b: jnp.maximum(a @ b, 0.0))(x, w)) == {
        "calls": [], "outside": {"dot_general": 1, "max": 1}}


def test_pallas_runs_on_cpu_only_in_interpret_mode_as_a_while_loop():
    """The facts exercise 19's statement teaches: no interpret mode, no kernel on a CPU; with it,
    the optimized HLO holds no custom call but one while loop over the grid, whose output starts
    as NaN (a block the kernel never writes stays NaN)."""
    from jax.experimental import pallas as pl

    def never_writes(x_ref, o_ref):
        pass

    def call(x, interpret):
        return pl.pallas_call(never_writes, grid=(4,), in_specs=[pl.BlockSpec((2, 3), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((2, 3), lambda i: (i, 0)),
                              out_shape=jax.ShapeDtypeStruct((8, 3), jnp.float32), interpret=interpret)(x)

    x = np.ones((8, 3), np.float32)
    try:
        call(x, False)
    except ValueError as err:
        assert "Only interpret mode is supported on CPU" in str(err)
    else:
        raise AssertionError("a compiled Pallas kernel ran on the CPU")
    assert np.isnan(np.asarray(call(x, True))).all()
    text = jax.jit(lambda v: call(v, True)).lower(x).compile().as_text()  # XLA may wrap a small loop in a call
    assert "custom-call" not in text and text.count(" while(") == 1
    assert '"known_trip_count":{"n":"4"}' in text


def megatron_hlo(w2_spec):
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    x = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P("data", None)))
    w1 = jax.device_put(jnp.ones((16, 32)), NamedSharding(mesh, P(None, "model")))
    w2 = jax.device_put(jnp.ones((32, 16)), NamedSharding(mesh, w2_spec))
    compiled = jax.jit(lambda x, a, b: jax.nn.relu(x @ a) @ b).lower(x, w1, w2).compile()
    return compiled.as_text()


def test_collective_counts_read_the_entry_of_optimized_hlo():
    text = megatron_hlo(P("model", None))
    counts = ir.collective_counts(text)
    assert counts["all-reduce"] == 1
    assert counts["all-gather"] == 0 and counts["all-to-all"] == 0
    assert ir.entry_computation(text).startswith("ENTRY")
    gathered = ir.collective_counts(megatron_hlo(P(None, "model")))
    assert gathered["all-gather"] >= 1


def test_collective_shapes_read_each_collectives_result_in_the_entry():
    hlo = ("HloModule m\n\n%region (a: f32[], b: f32[]) -> f32[] {\n  %x = f32[2,2]{1,0} all-reduce(%a)\n}\n\n"
           "ENTRY %main (p: f32[8,8]) -> f32[8,8] {\n  %p = f32[8,8]{1,0} parameter(0)\n"
           "  %ag = f32[8,32]{1,0} all-gather(%p), channel_id=1\n"
           "  %pair = (f32[12,16]{1,0}, f32[4]{0}) all-reduce(%p, %p), channel_id=2\n"
           "  ROOT %all-reduce = f32[8,8]{1,0} all-reduce(%p), channel_id=3, to_apply=%region\n}\n")
    assert ir.collective_shapes(hlo, "all-reduce") == [[(12, 16), (4,)], [(8, 8)]]
    assert ir.collective_shapes(hlo, "all-gather") == [[(8, 32)]]
    assert ir.collective_shapes(hlo, "all-to-all") == []


def test_entry_computation_requires_an_entry():
    try:
        ir.entry_computation("HloModule m\n")
    except ValueError:
        return
    raise AssertionError("expected ValueError")


def _ring_program(mesh, steps, check_vma=True):
    """A ring of ``steps`` one-step ppermutes over 'model' inside jax.shard_map."""
    m = mesh.shape["model"]

    def body(x):
        acc = buf = x
        for _ in range(steps):
            buf = lax.ppermute(buf, "model", [(j, (j + 1) % m) for j in range(m)])
            acc = acc + buf
        return acc

    return jax.shard_map(body, mesh=mesh, in_specs=P("model", None), out_specs=P("model", None), check_vma=check_vma)


def test_collective_permute_pairs_are_read_from_the_entry():
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    x = np.zeros((4, 3), np.float32)
    text = jax.jit(_ring_program(mesh, 3)).lower(x).compile().as_text()
    pairs = ir.collective_permute_pairs(text)
    ring = sorted((i * 4 + j, i * 4 + (j + 1) % 4) for i in range(2) for j in range(4))
    assert len(pairs) == 3 == ir.collective_counts(text)["collective-permute"]
    assert all(sorted(p) == ring for p in pairs)
    assert ir.collective_permute_pairs(megatron_hlo(P("model", None))) == []


def test_inputs_reaching_counts_a_constraint_only_where_its_result_is_used():
    wsc = jaxcompat.SHARDING_CONSTRAINT_PRIMITIVE
    mesh = Mesh(np.array(jax.devices()[:1]), ("d",))
    gather = NamedSharding(mesh, P())

    def used(x, w1, w2):
        return jnp.tanh(x @ jax.lax.with_sharding_constraint(w1.T.T, gather)) @ w2

    def dead(x, w1, w2):
        jax.lax.with_sharding_constraint(w2, gather)  # thrown away: gathers nothing
        return jnp.tanh(x @ jax.lax.with_sharding_constraint(w1, gather)) @ w2

    def beside(x, w1, w2):  # used, but not by the product
        return jnp.tanh(x @ w1) @ w2 + 0.0 * jnp.sum(jax.lax.with_sharding_constraint(w2, gather))

    args = (jnp.ones((2, 3)), jnp.ones((3, 4)), jnp.ones((4, 5)))
    for fn, anywhere, into_a_product in ((used, [1], [1]), (dead, [1], [1]), (beside, [2], [])):
        jaxpr = jax.make_jaxpr(jax.jit(fn))(*args)
        assert ir.inputs_reaching(jaxpr, wsc) == anywhere
        assert ir.inputs_reaching(jaxpr, wsc, then="dot_general") == into_a_product


def test_shard_maps_report_check_vma_at_any_depth():
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    x = np.zeros((4, 3), np.float32)
    on = jax.make_jaxpr(jax.jit(_ring_program(mesh, 1)))(x)
    off = jax.make_jaxpr(_ring_program(mesh, 1, check_vma=False))(x)
    assert [f["check_vma"] for f in ir.shard_maps(on)] == [True]
    assert [f["check_vma"] for f in ir.shard_maps(off)] == [False]
    assert "model" in ir.shard_maps(on)[0]["in_specs"]
    assert ir.shard_maps(jax.make_jaxpr(lambda v: v + 1)(x)) == []


def test_equations_carry_the_transformations_that_made_them():
    """`grade compare` reads strategies from the `Transform` entries JAX puts on every
    equation's name stack (``grader.compare.jaxpr_canon.transforms_of``): vmap, jvp and
    transpose, outermost first, relative to the enclosing jaxpr."""
    from grader.compare import jaxpr_canon

    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w))

    closed = jax.make_jaxpr(jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0))))(jnp.ones((3, 2)), jnp.ones((4, 3)))
    paths = jaxpr_canon.structure(closed)["paths"]
    assert {"vmap/jvp", "vmap/transpose/jvp"} <= set(paths), paths
    inner = jax.make_jaxpr(jax.vmap(jax.jit(jax.grad(loss)), in_axes=(None, 0)))(jnp.ones((3, 2)), jnp.ones((4, 3)))
    assert "vmap/transpose/jvp" in jaxpr_canon.structure(inner)["paths"]  # a jit inside: prefixes add up


def test_random_bits_primitive_is_one_per_draw_and_one_under_vmap():
    def loop(key, xs):
        return jnp.stack([x + jax.random.normal(k, x.shape) for k, x in zip(jax.random.split(key, xs.shape[0]), xs)])

    def vmapped(key, xs):
        return jax.vmap(lambda k, x: x + jax.random.normal(k, x.shape))(jax.random.split(key, xs.shape[0]), xs)

    def bits(f, key, batch):
        counts = ir.primitive_counts(jax.make_jaxpr(f)(key, jnp.zeros((batch, 3))))
        return sum(counts.get(p, 0) for p in jaxcompat.RANDOM_BITS_PRIMITIVES)

    for key in (jax.random.key(0), jax.random.PRNGKey(0)):  # typed and legacy keys
        assert bits(loop, key, 2) == 2 and bits(loop, key, 5) == 5
        assert bits(vmapped, key, 2) == bits(vmapped, key, 5) == 1


def test_custom_vjp_primitive_and_largest_value():
    @jax.custom_vjp
    def ident(x):
        return x

    ident.defvjp(lambda x: (x, None), lambda _, g: (g,))
    closed = jax.make_jaxpr(jax.jit(ident))(jnp.ones(3))
    assert any(ir.primitive_counts(closed).get(p) for p in jaxcompat.CUSTOM_VJP_PRIMITIVES)

    def f(x):
        return jnp.sum(jnp.sin(x) * jnp.sum(x))

    x = jnp.ones(64)
    hessian = ir.largest_value(jax.make_jaxpr(lambda v: jax.hessian(f)(x) @ v)(x))
    assert hessian["elements"] == 64 * 64 and "64,64" in hessian["aval"]
    hvp = ir.largest_value(jax.make_jaxpr(lambda v: jax.jvp(jax.grad(f), (x,), (v,))[1])(x))
    assert hvp["elements"] == 64


def test_a_vjp_pullback_shows_whether_its_derivative_goes_through_a_custom_vjp_rule_alone():
    @jax.custom_vjp
    def rowwise(x):
        return jnp.tanh(x)

    rowwise.defvjp(lambda x: (jnp.tanh(x), jnp.tanh(x)), lambda y, g: (g * (1 - y * y),))

    def through(f, x):
        _, pullback = jax.vjp(f, x)
        linear = jaxcompat.vjp_linear_jaxpr(pullback)
        assert linear is not None and ir.primitive_counts(linear).get(jaxcompat.CUSTOM_LIN_PRIMITIVE, 0) <= 1
        return ir.bypassing(linear, jaxcompat.CUSTOM_LIN_PRIMITIVE)

    x = jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)
    # the rule alone, however it is wrapped, moved or mapped: nothing bypasses it
    for honest in (rowwise, jax.jit(rowwise), jax.checkpoint(rowwise), lambda v: rowwise(v.astype(jnp.float32) * 2.0),
                   lambda v: jax.lax.map(rowwise, v), lambda v: jax.vmap(rowwise)(v)):
        assert through(honest, x) == []
    # JAX's own derivative, alone or beside a rule fed stop_gradient(x) or scaled by zero
    assert "mul" in through(lambda v: jnp.tanh(v) * 1.0, x)
    assert through(lambda v: rowwise(jax.lax.stop_gradient(v)) + (v - jax.lax.stop_gradient(v)), x)
    assert through(lambda v: jnp.tanh(v) + 0.0 * rowwise(v), x)
    # a path that passes no rule inside a loop is seen too
    assert through(lambda v: jax.lax.map(lambda r: jnp.tanh(r), v), x)


def test_keys_used_twice_follows_copies_that_jaxs_checker_lets_through():
    def uses(f):
        return ir.keys_used_twice(jax.make_jaxpr(f)(jax.random.key(0)))

    @jax.jit
    def two_draws(k):  # inlined twice below: the same inner variables, other keys
        a, b = jax.random.split(k)
        return jax.random.normal(a, (2,)) + jax.random.normal(b, (2,))

    def honest(key):
        keys = jax.random.split(key, 4)
        k1, k2 = jax.random.split(keys[0])
        looped = jax.lax.scan(lambda c, k: (c, jax.random.normal(k, (2,))), 0, keys[2:])[1]
        return (two_draws(k1), two_draws(k2), looped, jax.random.normal(jax.random.fold_in(keys[1], 3), (2,)),
                jax.vmap(lambda k: jax.random.uniform(k, (2,)))(jax.random.split(keys[1], 3)))

    assert uses(honest) == []
    for reused in (lambda k: (jax.random.normal(jax.random.clone(k), (3,)), jax.random.normal(k, (3,))),
                   lambda k: (jax.random.normal(jax.random.wrap_key_data(jax.random.key_data(k)), (3,)),
                              jax.random.split(k)),
                   lambda k: [jax.random.normal(jax.random.split(k, 2)[i % 2], (2,)) for i in range(3)],
                   lambda k: (jax.random.split(k, 3), jax.random.normal(jax.random.split(k, 3)[0], (2,))),
                   lambda k: (jax.random.normal(jax.random.clone(k), (2,)), k)):  # used, then returned
        assert uses(reused), reused


def test_key_reuse_checker_traces_and_sees_typed_keys_only():
    check = jaxcompat.key_reuse_checker()

    def twice(key):
        return jax.random.normal(key, (2,)) + jax.random.normal(key, (2,))

    def split_then_draw(key):
        a, _ = jax.random.split(key)
        return jax.random.normal(a, (2,)) + jax.random.normal(key, (2,))

    def fresh(key):
        a, b = jax.random.split(key)
        return jax.random.normal(a, (2,)) + jax.random.normal(b, (2,))

    for bad in (twice, split_then_draw):
        try:
            check(bad, jax.random.key(0))
        except jax.errors.KeyReuseError:
            pass
        else:
            raise AssertionError(f"{bad.__name__}: no KeyReuseError")
    check(fresh, jax.random.key(0))
    check(twice, jax.random.PRNGKey(0))  # a legacy uint32[2] key is not tracked
    # fold_in does not consume its key, and a key closed over under vmap is not seen
    check(lambda key: [jax.random.normal(jax.random.fold_in(key, i), (2,)) for i in range(3)], jax.random.key(0))
    check(lambda key: jax.vmap(lambda x: x + jax.random.normal(key, x.shape))(jnp.zeros((3, 2))), jax.random.key(0))


def test_elements_computed_counts_every_output_and_multiplies_scan_bodies():
    x = jnp.zeros((4, 8), jnp.float32)
    one = ir.elements_computed(jax.make_jaxpr(lambda a: jnp.tanh(a) * 2.0)(x))
    assert one == 2 * 32  # tanh and mul, 32 elements each

    def scanned(a):
        return jax.lax.scan(lambda c, _: (jnp.tanh(c) * 2.0, None), a, None, length=5)[0]

    assert ir.elements_computed(jax.make_jaxpr(scanned)(x)) == 5 * one + 32  # the body five times, the scan's result once
    token = ir.elements_computed(jax.make_jaxpr(lambda a: jnp.tanh(a[0, 0]))(x))
    assert token < one / 10  # a token of the work computes next to nothing


def test_a_tracer_passed_as_a_static_argument_raises_the_error_jaxcompat_names():
    step = jax.jit(lambda w, lr: w - lr, static_argnames=("lr",))
    try:
        jax.jit(lambda w, lr: step(w, lr=lr)).trace(jnp.ones(2), 0.1)
    except Exception as exc:  # noqa: BLE001
        assert jaxcompat.STATIC_TRACER_ERROR in str(exc).splitlines()[0].lower()
    else:
        raise AssertionError("a traced static argument did not raise")
