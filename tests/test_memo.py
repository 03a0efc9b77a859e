"""Learner-free workers answer from memory while their history is one seen before
(``grader.sandbox.memo``), and a worker that has to start replays that history first."""

from pathlib import Path

import numpy as np
import pytest

from grader import runner
from grader.manifest import load
from grader.render import timings_text
from grader.sandbox import memo
from grader.sandbox import user as sandbox_user
from grader.sandbox.client import Sandbox
from grader.submission import from_source

REPO = Path(__file__).resolve().parents[1]
SOURCE = b"import jax\n\n@jax.jit\ndef f(x):\n    return x * 2\n"


def calls(*dtypes):
    return [{"args": [np.ones(3, d)], "kwargs": {}} for d in dtypes]


def worker(shared: memo.Memo, source: bytes = SOURCE) -> memo.Remembered:
    snap = from_source("/course/solutions/ref.py", "ref.py", source)
    return memo.Remembered(snap, memo=shared, timeout_s=30).start()


def compiles(box, *dtypes) -> int:
    box.probe("generic:count_compiles", "f", calls(*dtypes), False)
    return box.last_meter["compiles"]


def test_a_seen_history_is_answered_without_a_worker_and_a_new_request_replays_it_first():
    shared = memo.Memo()
    with worker(shared) as first:
        assert first.proc is not None  # an identity never seen starts at once
        assert [compiles(first, np.float32), compiles(first, np.float32)] == [1, 0]

    with worker(shared) as second:
        assert compiles(second, np.float32) == 1 and second.proc is None and second.recalled == 1
        # not seen: the worker starts, lives the first request again, then answers this one
        assert compiles(second, np.int32) == 1 and second.proc is not None
        # f32 is in its cache only because the replay put it there: a fresh worker would compile again
        assert compiles(second, np.float32) == 0


def test_requests_sent_together_are_answered_in_order_across_the_switch_to_a_live_worker():
    shared = memo.Memo()
    with worker(shared) as first:
        first.probe("generic:count_compiles", "f", calls(np.float32), False)
    with worker(shared) as second:
        a = second.submit("probe", "generic:count_compiles", "f", calls(np.float32), False)  # remembered
        b = second.submit("probe", "generic:count_compiles", "f", calls(np.int32), False)  # new: goes live
        assert second.result(a)["outputs"][0].dtype == np.float32 and second.last_meter["compiles"] == 1
        assert second.result(b)["outputs"][0].dtype == np.int32 and second.last_meter["compiles"] == 1


def test_another_file_or_another_kind_of_worker_shares_nothing():
    shared = memo.Memo()
    with worker(shared) as first:
        compiles(first, np.float32)
    with worker(shared, SOURCE + b"\n# another file\n") as other_file:
        compiles(other_file, np.float32)
        assert other_file.proc is not None and other_file.recalled == 0
    snap = from_source("/course/solutions/ref.py", "ref.py", SOURCE)
    with memo.Remembered(snap, memo=shared, timeout_s=30, cpu_devices=2).start() as other_kind:
        compiles(other_kind, np.float32)
        assert other_kind.proc is not None and other_kind.recalled == 0


def test_a_remembered_answer_is_byte_for_byte_the_live_one_and_names_no_worker_folder():
    shared = memo.Memo()
    source = SOURCE + b"\ndef where():\n    return __file__\n"
    with worker(shared, source) as first:
        live = first.call("where")
    with worker(shared, source) as second:
        recalled = second.call("where")
        assert second.proc is None
    assert live == recalled == "/course/solutions/ref.py"


def test_the_audit_runs_every_worker_and_reports_an_answer_that_changed(monkeypatch):
    shared = memo.Memo()
    with worker(shared) as first:
        compiles(first, np.float32)
    for key in list(shared._items):  # an answer that is not what the worker says
        if shared._items[key] != b"imported":
            shared._items[key] = shared._items[key].replace(b'"compiles":1', b'"compiles":7')
    monkeypatch.setenv("GRADER_MEMO_AUDIT", "1")
    monkeypatch.setattr(memo, "audit_mismatches", [])
    with worker(shared) as audited:
        assert compiles(audited, np.float32) == 1 and audited.proc is not None and audited.recalled == 0
    assert len(memo.audit_mismatches) == 1 and '"compiles":7' in memo.audit_mismatches[0]


def test_answers_kept_on_disk_serve_a_later_process_and_the_folder_stays_within_its_cap(tmp_path, monkeypatch):
    snap = from_source("/course/solutions/ref.py", "ref.py", SOURCE)
    with memo.Remembered(snap, memo=memo.Memo(folder=tmp_path), persist=True, timeout_s=30).start() as first:
        assert compiles(first, np.float32) == 1
    later = memo.Memo(folder=tmp_path)  # what the next process finds
    with memo.Remembered(snap, memo=later, persist=True, timeout_s=30).start() as second:
        assert compiles(second, np.float32) == 1 and second.proc is None and second.recalled == 1
    with memo.Remembered(snap, memo=memo.Memo(folder=tmp_path), timeout_s=30).start() as not_persisting:
        assert not_persisting.proc is not None  # memory only: the folder is not read
    monkeypatch.setattr(memo, "MAX_DISK_BYTES", 1)
    memo._prune_folder(tmp_path, 1)
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith(".")]


def test_answers_persist_only_where_the_compile_cache_may(monkeypatch):
    monkeypatch.delenv("GRADER_NO_CACHE", raising=False)
    monkeypatch.setattr(sandbox_user, "isolating", lambda: False)
    assert memo.may_persist(True) and not memo.may_persist(False)
    monkeypatch.setenv("GRADER_NO_CACHE", "1")
    assert not memo.may_persist(True)


def test_off_switch(monkeypatch):
    monkeypatch.setenv("GRADER_NO_MEMO", "1")
    box = memo.learner_free(None, timeout_s=5)
    assert type(box) is Sandbox
    monkeypatch.delenv("GRADER_NO_MEMO")
    assert type(memo.learner_free(None, timeout_s=5)) is memo.Remembered


@pytest.mark.slow
def test_a_second_grading_starts_only_the_learners_sandboxes_and_gives_the_same_result(monkeypatch):
    """Exercise 1 has a clean worker and a reference solution: graded again in the same
    process, they answer from memory; the learner's sandboxes still run, and nothing in the
    result changes."""
    monkeypatch.setattr(memo, "_SHARED", memo.Memo())
    manifest = load(REPO / "exercises" / "manifest.toml")
    ex = manifest.get(1)
    path = REPO / "solutions" / ex.dir / ex.module_file
    snap = from_source(str(path), ex.module_file, path.read_bytes())
    runs = [runner.grade(manifest, [1], course_root=REPO, hidden_root=REPO / "solutions", snapshots={1: snap},
                         seed=11).exercises[0] for _ in range(2)]
    assert {"public", "hidden", "clean", "reference (public)", "reference (hidden)"} <= set(runs[0].timings)
    again = runs[1].timings
    assert again["public"]["wall_s"] > 0 and again["hidden"]["wall_s"] > 0 and "remembered" not in again["public"]
    for role in ("clean", "reference (public)", "reference (hidden)"):  # never started: every answer remembered
        assert again[role]["wall_s"] == 0 and again[role]["remembered"] > 0, (role, again)
    shown = timings_text(runs[1])  # grade exercise -v
    assert "clean from memory (" in shown and "reference (hidden) from memory (" in shown
    assert runs[0].score == runs[0].max_score
    assert [(c.name, c.status, c.score, c.message, c.measured) for c in runs[0].checks] == \
           [(c.name, c.status, c.score, c.message, c.measured) for c in runs[1].checks]
