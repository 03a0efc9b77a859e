"""Dev helper: grade one exercise's stub (default) or any learner file, print every check.
usage: .venv/bin/python /tmp/devgrade.py N [PATH_TO_LEARNER_FILE] [--seed S]"""
import sys, time
from pathlib import Path
from grader import manifest, runner
args = sys.argv[1:]
seed = None
if "--seed" in args:
    i = args.index("--seed"); seed = int(args[i+1]); del args[i:i+2]
n = int(args[0]); path = Path(args[1]).resolve() if len(args) > 1 else None
root = Path(".").resolve()
m = manifest.load(root / "exercises/manifest.toml")
t = time.time()
r = runner.grade(m, [n], course_root=root, hidden_root=root / "solutions", seed=seed,
                 module_overrides={n: path} if path else None)
for e in r.exercises:
    print(f"exercise {e.number}: {e.score}/{e.max_score}  seed={e.seed}  sandbox busy {e.duration_s:.2f}s")
    for c in e.checks:
        print(f"  [{c.status}] {c.name} ({c.score}/{c.max_score}) {c.message}")
        for label, v in (("measured", c.measured), ("expected", c.expected), ("hint", c.hint), ("detail", c.detail)):
            if v: print(f"      {label}: " + v.replace("\n", "\n        "))
    if e.output: print("  output:", e.output[:500])
print(f"wall {time.time()-t:.2f}s")
