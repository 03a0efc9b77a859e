"""What ``grade compare`` measures for exercise 3 (per-example gradient norms): ``SPEC``, its measurements
and their fixed inputs, and the strategies an instructor names (``grader.compare.specs`` documents the
kinds and collects every ``SPEC``; ``grader.compare.features`` the features the predicates read)."""

from __future__ import annotations

from grader.compare.features import Features
from grader.compare.specs import ExerciseSpec, Measurement, call, f32, seeded_rng
from grader.compare.strategy import Strategy

BATCH, GROWN_BATCH = 6, 11


def _grad_norm_calls() -> dict:
    rng = seeded_rng(4)

    def params() -> dict:
        return {"layers": [{"w": f32(rng, 5, 8), "b": f32(rng, 8)}, {"w": f32(rng, 8, 8), "b": f32(rng, 8)}],
                "out": {"w": f32(rng, 8, 3), "b": f32(rng, 3)}}

    calls = [call(params(), f32(rng, BATCH, 5), f32(rng, BATCH, 3)) for _ in range(3)]
    grown = call(params(), f32(rng, GROWN_BATCH, 5), f32(rng, GROWN_BATCH, 3))
    return {"kind": "jax", "target": "per_example_grad_norms", "calls": calls, "grow": {"call": grown}}


def _around_grad(form: str) -> tuple[list[str], list[str]]:
    """What a reverse-mode form composes outside its gradient and inside it (the function
    differentiated): ``vmap·grad·vmap`` -> (["vmap"], ["vmap"])."""
    words = form.split("·")
    k = words.index("grad")
    return words[:k], words[k + 1:]


def _per_example_grad(f: Features) -> bool:
    """vmap of grad, of vjp, of jacrev of the one-example loss: a gradient per example."""
    return any("vmap" in outer and "vmap" not in inner for outer, inner in map(_around_grad, f.part().reverse))


def _jacobian_of_losses(f: Features) -> bool:
    """jacrev of the vector of per-example losses: the differentiated function is vmapped."""
    return any("vmap" in outer and "vmap" in inner for outer, inner in map(_around_grad, f.part().reverse))


def _loops_over_examples(f: Features) -> bool:
    p = f.part()
    return "scan~size" in p.constructs or any(r.split("·")[0] in ("scan", "while") for r in p.reverse | p.forward)


def _forward_per_example(f: Features) -> bool:
    p = f.part()
    return not p.reverse and any(x.startswith("vmap·") for x in p.forward)


def _one_batch_gradient(f: Features) -> bool:
    p = f.part()
    return bool(p.reverse) and not any("vmap" in outer for outer, _ in map(_around_grad, p.reverse))


def _by_hand(f: Features) -> bool:
    p = f.part()
    return not p.autodiff and any("vmap" in x.split("·") for x in p.forms)


STRATEGIES = (
    Strategy("Python loop over the examples", lambda f: bool(f.part().grows),
             "the program grows with the batch: a Python loop unrolled into it"),
    Strategy("JAX loop over the examples (lax.map / scan / fori_loop)", _loops_over_examples,
             "a loop as long as the batch, or the gradient taken inside a loop"),
    Strategy("jacrev of the per-example losses", _jacobian_of_losses,
             "a reverse-mode Jacobian (vmap of grad) of a vmapped loss"),
    Strategy("vmap of grad", _per_example_grad, "a reverse-mode gradient (grad, vjp, jacrev) under vmap"),
    Strategy("forward mode per example (jacfwd / jvp)", _forward_per_example,
             "forward-mode derivatives (jvp, no transpose) under vmap"),
    Strategy("one gradient of the whole batch's loss", _one_batch_gradient,
             "a reverse-mode gradient with no vmap around it: one gradient, not one per example"),
    Strategy("backprop by hand (no autodiff)", _by_hand, "vmap, and no jvp or transpose anywhere"),
)

SPEC = ExerciseSpec(
    "per-example-grad-norms",
    (Measurement("per_example_grad_norms", _grad_norm_calls),),
    note="per_example_grad_norms's jaxpr and compile count on a two-layer MLP, batch of 6 (and 11, to see "
         "how it grows)",
    strategies=STRATEGIES)
