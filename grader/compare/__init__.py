"""`grade compare`: an instructor's view of how a class solved one exercise.

It groups the class's solutions of exercise N three ways and reports each group:

* by **outcome**: which checks passed and failed together (the outcome vector);
* by **strategy, then variant**: the strategy is what an instructor calls the approach
  (vmap of grad, a loop over the batch, backprop by hand), read from structure measured in
  a sandbox on fixed inputs (transformations in the jaxpr, loops, growth with the size,
  primitive families, compile behaviour), named by the exercise's spec or clustered; the
  variant is the exact fingerprint inside it (canonical jaxpr, primitives, compile count,
  XLA's cost analysis, run time); exercises without a spec fall back to the normalised
  source;
* by **source**: names, comments, docstrings and formatting removed, so near-identical
  files are paired for a human to look at ("near-identical, worth a look").

Modules, in the order the data flows:

``sources``      SOURCE arguments (gradebooks, folders, git forks) -> solutions with code and outcomes
``specs``        the spec machinery and registry; each exercise's spec (which functions are
                 measured, on which fixed inputs) is ``grader/exercises/<pkg>/compare.py``
``workers``      N processes, one sandbox per submission: grade what has no outcome, measure
``fingerprint``  the trusted side of a measurement; variant keys and labels
``features``     what a strategy is read from, and the distance between two solutions
``strategy``     strategies: the spec's named ones, then clustering of the rest
``jaxpr_canon``  a jaxpr as canonical text (also used inside the sandbox by the probe
                 ``grader/probes/fingerprint.py``)
``source_norm``  the normalised learner part of a file; similarity of two files
``store``        the cache tables kept in the gradebook file
``run``          the pipeline: ``analyse`` -> ``Analysis``
``grouping``     outcome groups, variants, near-identical pairs and clusters
``model``        the report as plain data (``--json``, versioned)
``diffs``, ``plots``, ``report_text`` (rich), ``report_html`` (one self-contained file), ``html_page``
``class_view``   ``grade class``: the whole class from a gradebook (``report_class``: its page)
``cli``          the click commands ``grade compare`` and ``grade class`` (registered by ``grader.cli``)

This package is imported inside every sandbox worker too (the probe imports ``jaxpr_canon``
before learner code loads), so this file and ``jaxpr_canon`` import nothing but the standard library.
"""
