"""No hidden input reaches what a learner reads.

Known-wrong fixtures of exercises 1-6 are graded with the hidden checks (snapshots built
the way ``grade verify`` builds them: the reference solution with the mistake appended),
and the draws each hidden check made are recomputed at the same seed with the checks' own
draw functions.  Every learner-facing text -- ``ExerciseResult.to_dict(private=False)``,
``grader.reports.learner_text``'s words for each check, the GitHub job summary, the
Gradescope results and the terminal report -- must hold none of the drawn shapes or values.
The same gradings prove that the failures really carry a diagnosis of their own (not the
manifest's fallback line), and that the instructor's private text still has the detail.

All exercises of one round are graded in one ``runner.grade`` call, so their sandboxes
start together, and the three rounds run side by side (like ``grade verify``, sharing one
compile cache as its gradings do: ``grader.cache.course_cache``): a few fixtures per
exercise, in about the time of one grading per core.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from grader import render
from grader.course import verify
from grader.coverage import check_rng
from grader.manifest import load
from grader.reports import github, gradescope, learner_text
from grader.results import FAILED
from grader.submission import from_source

REPO = Path(__file__).resolve().parents[1]
MANIFEST = load(REPO / "exercises" / "manifest.toml")
SEED = 20240611

#: per round, the fixture graded for each exercise (chosen for the variety of hidden failures they cause)
ROUNDS = [
    {1: "predict_ignores_array_dtypes", 2: "exact_length_padding", 3: "squared_norms", 4: "x_features_over_model",
     5: "fixed_length_32", 6: "top_level_only"},
    {1: "temperature_static", 2: "wrong_normaliser", 3: "lax_map_over_batch", 4: "w2_column_parallel",
     5: "stop_gradient_state", 6: "two_branches_only"},
    {1: "shift_dropped", 2: "bucket_off_by_one", 3: "not_jitted", 4: "mesh_hardwired_2x4",
     5: "custom_vjp_over_while", 6: "skips_seen_subjaxprs"},
]


def hidden_module(number):
    ex = MANIFEST.get(number)
    spec = importlib.util.spec_from_file_location(f"hidden_feedback_{number:02d}", ex.hidden_checks(REPO / "solutions"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the drawn shapes and values, as they could be written -------------------------------------

def shape_tokens(shape):
    dims = [int(d) for d in shape]
    if not dims:
        return set()
    inner = ", ".join(map(str, dims))
    out = {f"[{inner}]", f"[{','.join(map(str, dims))}]", f"({inner}{',' if len(dims) == 1 else ''})"}
    if len(dims) > 1:
        out |= {"x".join(map(str, dims)), " x ".join(map(str, dims))}
    return out


def float_tokens(value):
    """How a drawn float could be written: in full, or to 3-5 significant digits (to 2 decimals
    only when it was drawn with 2, as exercise 1's scalars and exercise 6's constants are)."""
    value = float(value)
    out = {repr(value), f"{value:.3f}", f"{value:.3g}", f"{value:.4g}", f"{value:.5g}"}
    if round(value, 2) == value:
        out.add(f"{value:.2f}")
    return {t for t in out if "." in t and len(t.lstrip("-")) >= 4}  # "1.25", never a bare "2" or "0.5"


def array_tokens(arr):
    arr = np.asarray(arr)
    out = shape_tokens(arr.shape)
    if arr.dtype.kind == "f":
        for v in arr.reshape(-1)[:12]:
            out |= float_tokens(v)
    return out


def spec_tokens(spec):
    """Tokens of an exercise-1 value description (arrays by shape, Python floats by value)."""
    out = set()
    if isinstance(spec, float):
        out |= float_tokens(spec)
    elif isinstance(spec, dict) and "array" in spec:
        out |= shape_tokens(spec["shape"])
    elif isinstance(spec, dict) and "tuple" in spec:
        for s in spec["tuple"]:
            out |= spec_tokens(s)
    elif isinstance(spec, dict) and "dict" in spec:
        for s in spec["dict"].values():
            out |= spec_tokens(s)
    return out


def drawn_tokens(number, seed):
    """Every drawn shape and value of exercise ``number``'s hidden checks at ``seed``."""
    m, out = hidden_module(number), set()
    if number == 1:
        for check in m.PLANS:
            for _, calls in m.draw_check_sequences(check_rng(seed, f"test_{check}"), check):
                for call in calls:
                    for v in list(call["args"]) + list(call["kwargs"].values()):
                        out |= spec_tokens(v)
        requests, _, _ = m.draw_workload(check_rng(seed, m.WORKLOAD_TEST))
        for req in requests:
            logits, temperature, shift = req["args"][:3]
            out |= shape_tokens(logits.shape) | float_tokens(temperature) | float_tokens(shift)
    elif number == 2:
        case = m.draw_training_case(seed)
        out |= {t for leaf in case["params"].values() for t in shape_tokens(np.shape(leaf))}
        for batch in case["batches"]:
            out |= shape_tokens(batch["tokens"].shape)
        for lr in case["lrs"]:
            out |= float_tokens(lr)
        buckets, batches = m.draw_other_buckets(check_rng(seed, "test_padding_and_mask"))
        out |= {str(buckets), str(list(buckets))} | {t for b in batches for t in shape_tokens(b["tokens"].shape)}
    elif number == 3:
        for batch in (1, 5, 16):
            params, xs, ys = m.draw_case(check_rng(seed, f"test_matches_one_at_a_time[{batch}]"), batch)
            for leaf in [xs, ys] + [v for layer in params["layers"] for v in layer.values()] + list(params["out"].values()):
                out |= shape_tokens(np.shape(leaf))
    elif number == 4:
        for arr in m.draw_problem(check_rng(seed, m.PRIMARY_TEST)):
            out |= shape_tokens(arr.shape)
        for _mesh_shape, arrays in m.draw_others(check_rng(seed, m.OTHER_TEST)):  # the meshes are fixed, the arrays drawn
            for arr in arrays:
                out |= shape_tokens(arr.shape)
    elif number == 5:
        for _, theta, x, max_steps in m.draw_match_cases(check_rng(seed, "test_matches_while_version"),
                                                         m.size_of(seed)):
            out |= float_tokens(theta) | array_tokens(x) | {f"max_steps={max_steps}", f"max_steps = {max_steps}"}
        for theta, x, weights in m.draw_grad_cases(check_rng(seed, "test_grad_works_and_matches_forward")):
            out |= float_tokens(theta) | array_tokens(x) | array_tokens(weights)
    elif number == 6:
        functions = list(m.draw_nested(check_rng(seed, "test_counts_nested_primitives")))
        functions += list(m.draw_constructs(check_rng(seed, "test_counts_inside_every_construct")).values())
        for source, specs, _ in functions:
            out |= {f"def {line.split('def ')[1]}" for line in source.splitlines() if line.startswith("def g")}
            out |= {t for shape, _ in specs for t in shape_tokens(shape)}
            out |= {tok for tok in source.replace("(", " ").replace(")", " ").replace(",", " ").split()
                    if "." in tok and tok.replace(".", "").replace("-", "").isdigit() and len(tok) >= 4}
    return out


# --- grading ---------------------------------------------------------------------------------------

def snapshot(number, fixture):
    ex = MANIFEST.get(number)
    folder = REPO / "fixtures" / ex.dir / fixture
    source = verify.fixture_source(ex, REPO, folder)
    return from_source(str(folder / ex.module_file), ex.module_file, source.encode("utf-8"))


def grade_round(plan):
    """Runs in a grading-pool process: one grading of one fixture per exercise."""
    return verify.grade_course_file(MANIFEST, sorted(plan), course_root=REPO, hidden_root=REPO / "solutions",
                                    snapshots={n: snapshot(n, f) for n, f in plan.items()}, seed=SEED)


@pytest.fixture(scope="module")
def rounds():
    """Every round graded, spread over the cores: [(plan, RunResult)]."""
    # as `grade verify` does: sandboxes forked from one JAX import per pool process, one compile cache
    with verify.grading_pool(min(len(ROUNDS), os.cpu_count() or 1)) as pool:
        return list(zip(ROUNDS, pool.map(grade_round, ROUNDS)))


@pytest.fixture(params=range(len(ROUNDS)), ids=lambda i: f"round{i + 1}")
def graded(request, rounds):
    return rounds[request.param]


def learner_texts(run, ex):
    """Everything a learner can read about ``ex``'s hidden checks in this run.  (Public checks
    show their own, public inputs by design: drawn from the seed too, they may coincide with a
    hidden draw, so they are left out here.)"""
    # timings are not inputs, but "0.2xx s" could pass for a drawn "0.20": zero them
    ex = dataclasses.replace(ex, duration_s=0.0, checks=tuple(dataclasses.replace(c, duration_s=0.0)
                                                                for c in ex.checks if c.visibility == "hidden"))
    run = dataclasses.replace(run, duration_s=0.0, started_at="")
    texts = [json.dumps(ex.to_dict(private=False)), learner_text.exercise_verdict(ex)]
    texts += [learner_text.check_text(ex, c) for c in ex.checks]
    one = dataclasses.replace(run, exercises=(ex,))
    texts += [github.job_summary(one), gradescope.to_gradescope_json(one)]
    console = Console(file=io.StringIO(), width=200, color_system=None)
    render.print_run(one, console=console)
    texts.append(console.file.getvalue())
    return "\n".join(texts)


def test_no_drawn_shape_or_value_reaches_the_learner(graded):
    plan, run = graded
    leaks = {}
    for ex in run.exercises:
        assert not ex.error, f"exercise {ex.number}: {ex.error} {ex.private[-2000:]}"
        tokens = drawn_tokens(ex.number, ex.seed)
        assert tokens, f"exercise {ex.number}: no drawn shapes or values were recomputed"
        text = learner_texts(run, ex).replace(run.jax_version, "<jax>").replace(run.grader_version, "<grader>")
        found = sorted(t for t in tokens if t in text)
        if found:
            leaks[f"exercise {ex.number} ({plan[ex.number]})"] = found[:10]
    assert not leaks, f"drawn shapes or values in learner-facing text: {leaks}"


def test_failed_hidden_checks_say_what_is_true_of_the_failure(graded):
    """Each graded fixture fails a hidden check, and what the learner reads about it is the
    check's own diagnosis (never the manifest's fallback line), while the instructor keeps
    the measured detail."""
    plan, run = graded
    for ex in run.exercises:
        spec = {c.name: c for c in MANIFEST.get(ex.number).checks}
        failed = [c for c in ex.checks if c.visibility == "hidden" and c.status == FAILED]
        assert failed, f"exercise {ex.number} ({plan[ex.number]}): no hidden check failed"
        for c in failed:
            assert c.message and c.message.split(" [")[0] != spec[c.name].feedback, \
                f"exercise {ex.number} {c.name}: only the manifest's line reached the learner: {c.message}"
            assert c.hint, f"exercise {ex.number} {c.name}: no advice"
            assert c.private, f"exercise {ex.number} {c.name}: nothing kept for the instructor"


def test_the_recomputed_draws_are_the_real_ones(graded):
    """The instructor's private text quotes drawn inputs: finding them there shows that the
    tokens recomputed above are the very draws the checks made (the test above is not vacuous)."""
    plan, run = graded
    quoted = {}
    for ex in run.exercises:
        tokens = drawn_tokens(ex.number, ex.seed)
        private = "\n".join(c.private for c in ex.checks)
        quoted[ex.number] = sorted(t for t in tokens if t in private)
    assert any(quoted.values()), f"no drawn input found even in the instructor's text: {plan}"
