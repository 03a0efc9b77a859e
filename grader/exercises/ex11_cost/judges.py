"""Exercise 11 (cost, memory and honest timing): reading the learner's answers, and the
timing verdicts, shared by the public and the hidden checks.  No JAX here: the truth is
measured in the clean worker and the timings in the sandbox (``grader/exercises/ex11_cost/probes.py``).

Timing verdicts compare the learner's ``benchmark`` with the probe's own timing of an
equivalent fresh function, measured right before and right after it in the same process,
for a light and a heavy workload (``tests/test_ex11_timing.py`` exercises every rule).
The bounds are wide on purpose -- several gradings may share two cores -- and each one
sits far from both what a correct benchmark measures and what the mistake it catches
measures:

* compile: within [fastest probe compile / COMPILE_FACTOR, slowest * COMPILE_FACTOR +
  COMPILE_SLACK_S].  ``jax.jit(fn)`` alone compiles nothing (microseconds) and a second,
  cached call is a run (under a millisecond), while the compile takes tens of milliseconds;
* run, heavy workload: at least the probe's fastest run / RUN_FACTOR.  Timing a call
  without waiting for its result measures the dispatch (microseconds);
* run, both workloads: under the probe's fastest compile / COMPILE_OVER_RUN.  A timed call
  that compiles takes as long as a compile, tens of times a run;
* scaling: the heavy run at least MIN_SCALING times the light one whenever the probe's
  fastest heavy run was at least PROBE_SCALING times its fastest light run (it is about
  15 times: numbers that do not follow the work -- e.g. constants -- are not measurements).
  The light runs are tens of microseconds, so a busy machine can inflate them: a verdict
  that rests on this rule alone is measured again (``measure_timing``);
* one run, not the total: the heavy workload is benchmarked with 40 repeats and again with
  4; a total grows with the repeats (10 times), a median or a minimum does not (measured
  again too, like the scaling rule).
"""

from __future__ import annotations

import math

import numpy as np

from grader.feedback import CheckFailed, describe
from grader.formulas import run_formula

COMPILE_FACTOR = 5.0
COMPILE_SLACK_S = 1.0
RUN_FACTOR = 10.0
COMPILE_OVER_RUN = 6.0
MIN_SCALING, PROBE_SCALING = 1.5, 4.0
#: [n, layers] of the f32[n, n] workloads: the light one quick to run and slow to compile (eight
#: small layers), the heavy one slow to run and quick to compile (one large layer), so run times
#: and compile times must follow the work in opposite directions
TIMING_SIZES = {"light": [48, 8], "heavy": [384, 1]}
#: the compile rule: the learner's light compile at least MIN_COMPILE_SCALING times its heavy
#: one, judged when the grader's fastest light compile is PROBE_COMPILE_SCALING times its fastest
#: heavy one (measured on 2 cores: 3-4 times quiet, 2-6 busy; unjudged measurements are taken again)
MIN_COMPILE_SCALING, PROBE_COMPILE_SCALING = 1.3, 2.0
TIMING_REPEATS = 5
#: ``repeats`` the learner's benchmark is called with: many for the heavy workload, and the heavy
#: workload once more with REPEATS_AGAIN (a median does not move with repeats; a total grows
#: 10 times); few for the light one, so a mean that includes the first call's compile stays above
#: a compile / 6.
LEARNER_REPEATS = {"light": 5, "heavy": 40}
REPEATS_AGAIN = {"heavy": 4}
#: A total: the 40-repeat run at least TOTAL_RATIO times the 4-repeat one (a total is 10 times,
#: a median about 1, and a busy machine moves one call's time by 2 or 3 at most) and at least
#: TOTAL_FLOOR times the grader's fastest run.
TOTAL_RATIO, TOTAL_FLOOR = 3.0, 1.5
#: Measurements a timing verdict may take: a rule that load alone can break (the light runs of a
#: busy machine catching up with the heavy ones; a load that comes and goes between the learner's
#: two heavy benchmarks) is measured again before it counts.
TIMING_ATTEMPTS = 3
TRANSIENT = {"no_scaling", "total", "no_compile_scaling"}
REPORT_KEYS = ("flops", "bytes", "transcendentals", "intensity", "argument_bytes", "output_bytes", "alias_bytes")


def as_number(value, what: str) -> float:
    """A finite Python float from an int, a float or a 0-d numeric array, or a CheckFailed."""
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iuf":
        value = value.item()
    if type(value) not in (int, float) or not math.isfinite(value):
        raise CheckFailed(f"{what} should be a finite number", measured=describe(value), expected="a float",
                          hint="return plain numbers (float(...)), not strings or arrays of several values",
                          diagnosis=f"{what} is not a finite number", advice="return plain Python numbers")
    return float(value)


def predictions(box, name: str, arglists: list) -> list:
    """``name(*args)`` for each of ``arglists``, run in the worker without JAX (the
    ``without_jax`` fixture, ``grader.sandbox.nojax``): a prediction is a formula of the
    shapes, so it must run where no JAX or XLA exists, threads included.  One that reaches
    for JAX fails here with what it used (``grader.formulas``)."""
    return [run_formula(lambda: box.call(name, *args), name,
                        hint="work the numbers out from the shapes with arithmetic; leave jax.jit to part B",
                        advice="compute the numbers from the shapes with plain arithmetic (np.dtype(dtype).itemsize "
                               "gives an element's size); no jax, jnp or jax.jit inside the prediction",
                        import_advice="keep module-level code to imports, constants and definitions; build JAX "
                                      "arrays inside the functions of parts B and C")
            for args in arglists]


def read_dict(value, keys, what: str) -> dict:
    """``{key: float}`` for every key of ``keys``, or a CheckFailed naming what is missing."""
    if not isinstance(value, dict) or any(k not in value for k in keys):
        missing = [k for k in keys if not isinstance(value, dict) or k not in value]
        raise CheckFailed(f"{what} should return a dict with keys {list(keys)}", measured=describe(value),
                          expected=f"also {missing}", hint="see the stub's docstring for the keys",
                          diagnosis=f"{what} did not return a dict with every key the stub lists",
                          advice="return a dict with exactly the keys of the stub's docstring")
    return {k: as_number(value[k], f"{what}[{k!r}]") for k in keys}


def mismatches(got: dict, want: dict, keys, rtol: float = 1e-6) -> list[str]:
    """The keys whose values differ (relative tolerance ``rtol``), each as readable text."""
    return [f"{k}: {got[k]:.6g} vs {want[k]:.6g}" for k in keys
            if not math.isclose(got[k], want[k], rel_tol=rtol, abs_tol=1e-9)]


# --- timing ------------------------------------------------------------------------------------
def read_timing(value, what: str = "benchmark(fn, *args)") -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise CheckFailed(f"{what} should return a pair (compile_seconds, run_seconds)", measured=describe(value),
                          expected="a tuple of two floats", hint="return compile_s, run_s",
                          diagnosis=f"{what} did not return a pair (compile_seconds, run_seconds)",
                          advice="end with `return compile_s, run_s`")
    compile_s, run_s = (as_number(v, what) for v in value)
    if compile_s <= 0 or run_s <= 0:
        raise CheckFailed(f"{what} returned a time that is not positive", measured=f"{compile_s}, {run_s}",
                          expected="two positive numbers of seconds", hint="use time.perf_counter() differences",
                          diagnosis=f"{what} returned a compile or run time that is zero or negative",
                          advice="measure with time.perf_counter() before and after, in seconds")
    return compile_s, run_s


def _probe(entry) -> tuple[list[float], list[float]]:
    compiles = [float(p["compile"]) for p in entry["probe"]]
    runs = [float(p["run"]) for p in entry["probe"]]
    return compiles, runs


def _ms(s: float) -> str:
    return f"{s * 1e3:.3g} ms"


def unmeasured(timing: dict, runs: bool = True) -> list[tuple[str, str]]:
    """('not_measured', text) for each workload ``benchmark`` returned times for without
    lowering and compiling ``fn`` (JAX's own caches, read by the probe around the call), or,
    on the heavy workload's second copy, without running the compiled ``fn`` once per timed
    call (its runs, recorded by the program itself: ``probes._runs``): numbers that may look right, but
    measured nothing."""
    out = []
    for label in ("light", "heavy"):
        entry = timing[label]
        evidence = entry.get("evidence") or {}
        if not evidence.get("lowered") or not int(evidence.get("compiles", 0)):
            out.append(("not_measured", f"{label} workload: fn was {'' if evidence.get('lowered') else 'never lowered, '}"
                                        f"{int(evidence.get('compiles', 0))} compilation(s) during benchmark(fn, ...)"))
        # the heavy workload's second copy counts its runs (a host callback): each timed call runs it
        ran, repeats = entry.get("runs_again"), entry.get("repeats_again")
        if runs and ran is not None and repeats is not None and int(ran) < int(repeats):
            out.append(("not_run", f"{label} workload: fn ran {int(ran)} time(s) during benchmark(fn, x, w, "
                                   f"repeats={int(repeats)}); each of the {int(repeats)} timed calls runs it"))
    return out


def compile_problems(timing: dict) -> list[tuple[str, str]]:
    """(code, text) for each workload whose compile time is out of bounds; codes: 'low',
    'high', 'no_compile_scaling' (the light workload's program is the slower to compile: a
    constant, or a number not measured, does not follow), and 'not_measured' (``unmeasured``)."""
    out = unmeasured(timing, runs=False)
    for label in ("light", "heavy"):
        compile_s, _ = read_timing(timing[label]["learner"])
        compiles, _ = _probe(timing[label])
        low, high = min(compiles) / COMPILE_FACTOR, max(compiles) * COMPILE_FACTOR + COMPILE_SLACK_S
        seen = (f"{label} workload: your compile {_ms(compile_s)}; the grader's own compiles "
                f"{', '.join(map(_ms, compiles))}")
        if compile_s < low:
            out.append(("low", f"{seen} (at least {_ms(low)} expected)"))
        elif compile_s > high:
            out.append(("high", f"{seen} (at most {_ms(high)} expected)"))
    if compile_scaled(timing):
        light, heavy = (read_timing(timing[label]["learner"])[0] for label in ("light", "heavy"))
        if light < MIN_COMPILE_SCALING * heavy:
            out.append(("no_compile_scaling", f"your light compile {_ms(light)} vs your heavy compile {_ms(heavy)}; "
                                              f"the grader's {', '.join(map(_ms, _probe(timing['light'])[0]))} vs "
                                              f"{', '.join(map(_ms, _probe(timing['heavy'])[0]))} (the light "
                                              f"workload's eight layers take longer to compile)"))
    return out


def run_problems(timing: dict) -> list[tuple[str, str]]:
    """(code, text) for each broken rule; codes: 'not_measured' and 'not_run' (``unmeasured``), 'no_block',
    'total' (the heavy run grows with repeats: the repeats summed),
    'compile_in_run', 'no_scaling'."""
    out, runs_of = unmeasured(timing), {}
    for label in ("light", "heavy"):
        _, run_s = read_timing(timing[label]["learner"])
        compiles, runs = _probe(timing[label])
        runs_of[label] = (run_s, runs)
        seen = (f"{label} workload: your run {_ms(run_s)}; the grader's runs {', '.join(map(_ms, runs))}, "
                f"its compiles {', '.join(map(_ms, compiles))}")
        if label == "heavy" and run_s < min(runs) / RUN_FACTOR:
            out.append(("no_block", f"{seen} (at least {_ms(min(runs) / RUN_FACTOR)} expected)"))
        if "learner_again" in timing[label]:
            _, again_s = read_timing(timing[label]["learner_again"])
            many, few = int(timing[label]["repeats"]), int(timing[label]["repeats_again"])
            if run_s >= TOTAL_RATIO * again_s and run_s >= TOTAL_FLOOR * min(runs):
                out.append(("total", f"{seen}; your run with repeats={many}: {_ms(run_s)}, with repeats={few}: "
                                     f"{_ms(again_s)} (one call's time does not grow with repeats)"))
        if run_s > min(compiles) / COMPILE_OVER_RUN:
            out.append(("compile_in_run", f"{seen} (under {_ms(min(compiles) / COMPILE_OVER_RUN)} expected)"))
    (light, light_runs), (heavy, heavy_runs) = runs_of["light"], runs_of["heavy"]
    if probe_scaled(timing) and heavy < MIN_SCALING * light:
        out.append(("no_scaling", f"your heavy run {_ms(heavy)} vs your light run {_ms(light)}; the grader's "
                                  f"{', '.join(map(_ms, heavy_runs))} vs {', '.join(map(_ms, light_runs))}"))
    return out


def compile_scaled(timing: dict) -> bool:
    """Whether the grader's own fastest light compile was at least PROBE_COMPILE_SCALING times
    its fastest heavy compile: only then is the compile-scaling rule judged (fastest against
    fastest: one slow compile of a busy moment does not switch the rule off)."""
    return min(_probe(timing["light"])[0]) >= PROBE_COMPILE_SCALING * min(_probe(timing["heavy"])[0])


def probe_scaled(timing: dict) -> bool:
    """Whether the grader's own fastest heavy run was at least PROBE_SCALING times its fastest
    light run: only then can the scaling rule be judged (a busy machine can slow the light
    runs until it cannot)."""
    return min(_probe(timing["heavy"])[1]) >= PROBE_SCALING * min(_probe(timing["light"])[1])


def measure_timing(measure) -> dict:
    """``measure()`` (the timing probe) once, and again -- up to TIMING_ATTEMPTS in all -- while
    the only broken rules are ones a busy machine can break on its own (TRANSIENT), or while
    the grader's own runs or compiles did not scale, so a scaling rule could not be judged: a
    mistake breaks its rule at every attempt, a load spike does not come back each time."""
    for _ in range(TIMING_ATTEMPTS):
        timing = measure()
        codes = {code for code, _ in run_problems(timing) + compile_problems(timing)}
        if codes - TRANSIENT or (not codes and probe_scaled(timing) and compile_scaled(timing)):
            return timing
    return timing
