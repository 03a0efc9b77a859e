"""Judging a training step that should donate its parameters and its optimizer state
(exercises 7 and 12): what the probe read from the learner's own compiled step -- the
bytes ``memory_analysis()`` says are aliased, whether the module declares an
``input_output_alias``, and which input buffers were deleted by one call."""

from __future__ import annotations

from grader.feedback import CheckFailed, expect_jit_own


def judge_donation(out: dict, *, state: str, state_key: str) -> None:
    """``out`` from a donation probe: ``jitted``, ``alias_bytes``, ``donatable_bytes``,
    ``header``, ``params_deleted``, ``out[state_key]`` (one flag per buffer),
    ``batch_deleted`` (x, y) and, where the probe reads it, ``args_donated`` (one flag per
    positional argument, from ``Lowered.args_info``: a donated batch no output can reuse
    stays alive, so only this shows it).  ``state`` names the second donated argument ("opt_state",
    "momentum")."""
    decorator = "@partial(jax.jit, donate_argnums=(0, 1))"
    expect_jit_own(bool(out["jitted"]), "train_step", why="what it donates", decorator=decorator)
    problems = []
    if out["alias_bytes"] < out["donatable_bytes"]:
        problems.append(f"memory_analysis().alias_size_in_bytes is {out['alias_bytes']}, but params and {state} "
                        f"hold {out['donatable_bytes']} bytes")
    if "input_output_alias" not in out["header"]:
        problems.append("the compiled module declares no input_output_alias")
    # Evidence the call itself donated: outputs in the consumed buffers.  Not every byte: inputs
    # that share one buffer (two zero moments) are donated once, so some outputs get new ones.
    if not out.get("reused_bytes", 0):
        problems.append(f"no output of the call lives in a buffer of params or {state} (read from the buffers' "
                        f"addresses): the call did not donate them")
    alive_p, alive_s = out["params_deleted"].count(False), out[state_key].count(False)
    if alive_p or alive_s:
        problems.append(f"{alive_p} params buffer(s) and {alive_s} {state} buffer(s) are still alive after the "
                        f"call (is_deleted() is False)")
    if problems:
        which = (f"the {state} buffers" if alive_s and not alive_p else "the parameter buffers"
                 if alive_p and not alive_s else f"the parameter and {state} buffers")
        raise CheckFailed(
            f"train_step does not donate both params and {state}",
            measured="; ".join(problems), expected=f"every buffer of params and {state} reused for the outputs",
            hint="jax.jit(..., donate_argnums=(0, 1)) donates the first two arguments",
            diagnosis=(f"{which} passed to train_step are not donated: they outlive the call" if alive_p or alive_s
                       else "the compiled step does not alias the donated buffers to its outputs"),
            advice=f"jit train_step with donate_argnums=(0, 1): the parameters and {state} are both replaced "
                   f"every step")
    donated = out.get("args_donated")  # Lowered.args_info, where the probe reads it
    if donated is not None and any(donated[2:]):
        names = {6: ["x", "y", "lr", "beta"], 4: ["x", "y"]}.get(  # exercise 12's step, exercise 7's
            len(donated), [f"argument {i}" for i in range(2, len(donated))])
        extra = [name for name, flag in zip(names, donated[2:]) if flag]
        raise CheckFailed(
            f"train_step donates {' and '.join(extra)} as well as params and {state}",
            measured=f"train_step.lower(...).args_info marks as donated: {', '.join(extra)} (beside params and "
                     f"{state})",
            expected=f"exactly params and {state} donated",
            hint="donate only what the step replaces: donate_argnums=(0, 1)",
            diagnosis=f"train_step donates more than params and {state}: {', '.join(extra)} too",
            advice=f"donate only params and {state}: donate_argnums=(0, 1). A donated batch that no output can "
                   f"reuse only makes JAX warn, but the caller may not use it again")
    if any(out["batch_deleted"]):
        raise CheckFailed(
            "train_step donates the batch (x or y) as well: the caller's data is deleted by the call",
            measured=f"x deleted: {out['batch_deleted'][0]}, y deleted: {out['batch_deleted'][1]}",
            expected="x and y still alive after the call",
            hint="donate only what the step replaces: donate_argnums=(0, 1)",
            diagnosis="the batch passed to train_step is deleted by the call (it was donated)",
            advice=f"donate only params and {state}: donate_argnums=(0, 1); a batch is often used again")
