"""`grade compare`: an instructor's view of how a class solved one exercise.

It groups the class's solutions of exercise N three ways and reports each group:

* by **outcome**: which checks passed and failed together (the outcome vector);
* by **approach**: a structural fingerprint measured in a sandbox on fixed inputs (the
  learner function's canonical jaxpr, its primitives, compile count, XLA's cost analysis
  and run time); exercises without a spec fall back to the normalised source;
* by **source**: names, comments, docstrings and formatting removed, so near-identical
  files are paired for a human to look at ("near-identical, worth a look").

Modules, in the order the data flows:

``sources``      SOURCE arguments (gradebooks, folders, git forks) -> solutions with code and outcomes
``specs``        the spec machinery and registry; each exercise's spec (which functions are
                 measured, on which fixed inputs) is ``grader/exercises/<pkg>/compare.py``
``workers``      N processes, one sandbox per submission: grade what has no outcome, measure
``fingerprint``  the trusted side of a measurement; approach keys and labels
``jaxpr_canon``  a jaxpr as canonical text (also used inside the sandbox by the probe
                 ``grader/probes/fingerprint.py``)
``source_norm``  the normalised learner part of a file; similarity of two files
``store``        the cache tables kept in the gradebook file
``run``          the pipeline: ``analyse`` -> ``Analysis``
``grouping``     outcome groups, approach groups, near-identical pairs and clusters
``model``        the report as plain data (``--json``, versioned)
``diffs``, ``plots``, ``report_text`` (rich), ``report_html`` (one self-contained file)
``cli``          the click command ``grade compare`` (``compare_cmd``, registered by ``grader.cli``)

This package is imported inside every sandbox worker too (the probe imports ``jaxpr_canon``
before learner code loads), so this file and ``jaxpr_canon`` import nothing but the standard library.
"""
