"""Strict, deterministic JAX for the grader's own tests: 8 CPU devices, fixed before init."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Tests grade throw-away folders: no persistent compile cache for them (one test turns it on).
os.environ["GRADER_NO_CACHE"] = "1"

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_numpy_rank_promotion", "raise")

# The mini course's check files are run by the grader under test, not by this session.
collect_ignore = ["minicourse"]
