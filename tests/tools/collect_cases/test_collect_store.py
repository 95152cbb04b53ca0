"""The SQLite store: schema and refusals, merging, 4 concurrent recorders (0 lost / 0 torn), a killed recorder."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from tttv2_tools.collect_cases import SCHEMA_VERSION, StoreError, load_cases
from tttv2_tools.collect_cases.fields import canonical_json
from tttv2_tools.collect_cases.store import CaseStore, Observation


def _ob(fields, hits=1, layers=(), target="m:C"):
    return Observation(target, canonical_json(fields), hits, set(layers), "cmd")


def test_new_store_is_wal_with_a_versioned_schema(tmp_path):
    path = tmp_path / "s.sqlite"
    CaseStore(path, create=True).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert dict(db.execute("SELECT name, value FROM meta"))["tool"] == "collect-cases"
    db.close()


def test_add_merges_hits_and_layers_and_counts_new_cases(tmp_path):
    with CaseStore(tmp_path / "s.sqlite", create=True) as store:
        assert store.add([_ob({"mode": "decode"}, 2, {0}), _ob({"mode": "prefill"}, 1, {1})]) == 2
        assert store.add([_ob({"mode": "decode"}, 3, {1, 2})]) == 0
        cases = {c.fields["mode"]: c for c in store.cases()}
        assert cases["decode"].hits == 5 and cases["decode"].layers == (0, 1, 2)
        assert store.targets() == [("m:C", 2, 6)]
        assert store.check() == []


@pytest.mark.parametrize(
    "content, message",
    [
        (b"hello, this is a text file", "not an SQLite database"),
        (None, "an SQLite database but not a collect-cases store"),
        (b"", "empty file, not a collect-cases store"),
    ],
)
def test_files_that_are_not_stores_are_refused(tmp_path, content, message):
    path = tmp_path / "other.db"
    if content is None:
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE users (name TEXT)")
        db.commit()
        db.close()
    else:
        path.write_bytes(content)
    with pytest.raises(StoreError, match=message):
        CaseStore(path)
    with pytest.raises(StoreError, match=message):
        load_cases(path, "m:C")  # the public API refuses it the same way


def test_missing_store_folder_and_directory_are_refused(tmp_path):
    with pytest.raises(StoreError, match="no such file"):
        CaseStore(tmp_path / "none.sqlite")
    with pytest.raises(StoreError, match="does not exist"):
        CaseStore(tmp_path / "no" / "s.sqlite", create=True)
    with pytest.raises(StoreError, match="is a directory"):
        CaseStore(tmp_path, create=True)


def test_a_store_from_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    CaseStore(path, create=True).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match=rf"schema version {SCHEMA_VERSION + 1} is newer"):
        CaseStore(path)


def test_check_finds_torn_rows(tmp_path):
    with CaseStore(tmp_path / "s.sqlite", create=True) as store:
        store.add([_ob({"mode": "decode"}), _ob({"mode": "prefill"})])
        store._db.execute("""UPDATE cases SET fields = '{"mode":"dec' WHERE id = 1""")
        store._db.execute("""UPDATE cases SET fields = '{"mode":"other"}' WHERE id = 2""")
        assert store.check() == [
            "case 1: fields are not JSON",
            "case 2: key does not match its fields (torn row)",
        ]


# --- several processes ----------------------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[1])
    from plain_layers import Plain
    from tttv2_tools.collect_cases.fields import parse_user_field
    from tttv2_tools.collect_cases.recorder import Recorder
    from tttv2_tools.collect_cases.targets import parse_target

    worker, calls, shared, forever = (int(v) for v in sys.argv[3:7])
    recorder = Recorder(sys.argv[2], [parse_target("plain_layers:Plain")], [parse_user_field("v=x")],
                        command=f"worker {worker}", flush_seconds=0.0)
    recorder.install()
    layers = [Plain(layer_num=i) for i in range(3)]
    i = 0
    while forever or i < calls:
        # `shared` cases every worker sees, and as many of its own
        value = i % shared if i % 2 == 0 else f"w{worker}-{i % shared}"
        layers[i % 3].forward(value if not forever else f"w{worker}-{i}", mode="decode" if i % 3 else "prefill")
        i += 1
    recorder.close()
    """
)


def _worker(store, folder, worker, calls, shared, forever=False):
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            WORKER,
            str(folder),
            str(store),
            str(worker),
            str(calls),
            str(shared),
            str(int(forever)),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )


def test_four_processes_recording_at_once_lose_and_tear_nothing(tmp_path, plain_module):
    store = tmp_path / "s.sqlite"
    calls, shared = 240, 10
    workers = [_worker(store, plain_module, w, calls, shared) for w in range(4)]
    for w in workers:
        assert w.wait(timeout=120) == 0, w.stderr.read()
    expected: dict[tuple, int] = {}
    for worker in range(4):
        for i in range(calls):
            value = i % shared if i % 2 == 0 else f"w{worker}-{i % shared}"
            key = (json.dumps(value), "decode" if i % 3 else "prefill")
            expected[key] = expected.get(key, 0) + 1
    with CaseStore(store) as opened:
        assert opened.check() == []
        got = {(json.dumps(c.fields["extra"]["v"]), c.fields["mode"]): c.hits for c in opened.cases()}
        layers = {c.layers for c in opened.cases()}
    assert got == expected  # every distinct case once, every call counted
    assert sum(got.values()) == 4 * calls
    assert layers <= {(0,), (1,), (2,), (0, 1, 2), (0, 1), (0, 2), (1, 2)}


def test_a_killed_recorder_leaves_the_store_consistent(tmp_path, plain_module):
    store = tmp_path / "s.sqlite"
    worker = _worker(store, plain_module, 0, 0, 10, forever=True)
    deadline = time.monotonic() + 60
    count = 0
    while time.monotonic() < deadline and count < 40:
        time.sleep(0.05)
        try:
            with CaseStore(store) as opened:
                count = len(opened.cases())
        except StoreError:
            continue  # not created yet
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)
    assert count >= 40, worker.stderr.read()
    with CaseStore(store) as opened:
        assert opened.check() == []
        kept = opened.cases()
        assert len(kept) >= count
        # and the write lock is free again: a new recorder can write
        opened.add([_ob({"after": True}, target="plain_layers:Plain")])
        assert len(opened.cases()) == len(kept) + 1


def _hold_read_lock(path):
    """Another connection inside a read transaction: SQLite cannot switch the file to WAL until it ends."""
    reader = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    reader.execute("BEGIN")
    reader.execute("SELECT name FROM sqlite_master").fetchall()
    return reader


def test_creation_waits_in_short_retries_for_the_switch_to_wal(tmp_path):
    import threading

    path = tmp_path / "s.sqlite"
    path.touch()
    reader = _hold_read_lock(path)
    release = threading.Timer(0.4, lambda: reader.execute("COMMIT"))
    release.start()
    try:
        with CaseStore(path, create=True, timeout=10) as store:  # each try waits 50 ms: this needs several
            assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert (
                store._db.execute("PRAGMA busy_timeout").fetchone()[0] == 10000
            )  # the store's own timeout again
    finally:
        release.join()
        reader.close()


def test_creation_gives_up_at_the_timeout_with_a_clear_error(tmp_path):
    path = tmp_path / "s.sqlite"
    path.touch()
    reader = _hold_read_lock(path)
    try:
        with pytest.raises(StoreError, match=r"cannot switch it to WAL: database is locked"):
            CaseStore(path, create=True, timeout=0.3)
    finally:
        reader.close()
