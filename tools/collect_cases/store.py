"""The case store: one SQLite file in WAL mode, one row per distinct case, safe for many recorders at once.

Every write is one ``BEGIN IMMEDIATE`` transaction (SQLite's write lock, waited for up to ``timeout`` seconds),
so concurrent recorders serialise their writes and a recorder killed mid-write leaves the last committed state.
A row stores the case's canonical JSON and its SHA-256 (``key``): a row whose key does not match its JSON is
torn, which ``check`` reports. The schema version is ``PRAGMA user_version``; a store written by a newer version
of the tool is refused rather than misread.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .cases import Case
from .errors import StoreError
from .fields import canonical_json

SCHEMA_VERSION = 2
# version 1 had no ``verifications`` table: it is read as is, and a writer adds the table (see ``_migrate``)
_READABLE_VERSIONS = (1, SCHEMA_VERSION)
TOOL = "collect-cases"
_SQLITE_MAGIC = b"SQLite format 3\x00"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cases (
    id            INTEGER PRIMARY KEY,
    target        TEXT NOT NULL,
    key           TEXT NOT NULL,
    fields        TEXT NOT NULL,
    layers        TEXT NOT NULL DEFAULT '[]',
    hits          INTEGER NOT NULL CHECK (hits >= 0),
    first_command TEXT NOT NULL,
    first_seen    TEXT NOT NULL,
    last_seen     TEXT NOT NULL,
    UNIQUE (target, key)
);
"""

# shadow verification (``collect-cases verify``): one row per verify run x case x generated file; the totals are
# that run's, rewritten as it goes (a run killed later keeps what it checked)
_VERIFICATIONS = """
CREATE TABLE IF NOT EXISTS verifications (
    id            INTEGER PRIMARY KEY,
    run           TEXT NOT NULL,
    target        TEXT NOT NULL,
    key           TEXT NOT NULL,
    generated     TEXT NOT NULL,
    twin_class    TEXT NOT NULL,
    checked       INTEGER NOT NULL CHECK (checked >= 0),
    passed        INTEGER NOT NULL CHECK (passed >= 0),
    first_failure TEXT,
    command       TEXT NOT NULL,
    first_seen    TEXT NOT NULL,
    last_seen     TEXT NOT NULL,
    UNIQUE (run, target, key, generated)
)
"""


def case_key(fields_json: str) -> str:
    """The identity of a case: SHA-256 of its canonical JSON (the target is the other half of the key)."""
    return hashlib.sha256(fields_json.encode()).hexdigest()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Observation:
    """What a recorder adds for one case: hits since the last flush and the layers that saw it."""

    target: str
    fields_json: str
    hits: int
    layers: set[int]
    command: str


@dataclass
class Verification:
    """One verify run's result on one case with one generated file (``first_failure`` None: every check passed)."""

    run: str
    target: str
    fields_json: str
    generated: str
    twin_class: str
    checked: int
    passed: int
    first_failure: str | None
    command: str
    last_seen: str = ""


class CaseStore:
    """An open store. ``CaseStore(path, create=True)`` makes a new one; otherwise the file must be a store."""

    def __init__(self, path: str | os.PathLike, *, create: bool = False, timeout: float = 60.0):
        self.path = Path(path)
        self._timeout = timeout
        _check_file(self.path, create)
        try:
            self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"store {self.path}: cannot open it: {exc}") from exc
        try:
            self._prepare(create)
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(f"store {self.path}: not a collect-cases store ({exc})") from exc
        except StoreError:
            self._db.close()
            raise

    def _prepare(self, create: bool) -> None:
        db = self._db
        # one read transaction: the version, tables and tool of one snapshot, never half of another process's
        # _create (its tables and tool already committed with the version read before it committed)
        db.execute("BEGIN")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            tool = (
                db.execute("SELECT value FROM meta WHERE name = 'tool'").fetchone()
                if {"meta", "cases"} <= tables
                else None
            )
        finally:
            db.execute("COMMIT")
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store {self.path}: schema version {version} is newer than this collect-cases reads "
                f"({SCHEMA_VERSION}); use the newer tttv2 that wrote it"
            )
        if not tables:
            if not create:
                raise StoreError(f"store {self.path}: empty file, not a collect-cases store")
            self._create()
            return
        if "meta" not in tables or "cases" not in tables:
            raise StoreError(
                f"store {self.path}: an SQLite database but not a collect-cases store "
                f"(tables: {', '.join(sorted(tables))})"
            )
        if tool is None or tool[0] != TOOL or version not in _READABLE_VERSIONS:
            raise StoreError(
                f"store {self.path}: not a collect-cases store (tool {tool and tool[0]!r}, version {version})"
            )
        self._use_wal()
        if create and version < SCHEMA_VERSION:
            self._migrate()

    def _migrate(self) -> None:
        """Bring a version 1 store to this version (a writer's job: readers read version 1 as it is)."""
        db = self._db
        with self._write():
            if db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:  # not done meanwhile
                db.execute(_VERIFICATIONS)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _create(self) -> None:
        db = self._db
        self._use_wal()
        with self._write():
            # another process may have created it while this one waited for the lock
            if db.execute("PRAGMA user_version").fetchone()[0] == 0:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)  # not executescript: it would commit the open transaction
                db.execute(_VERIFICATIONS)
                db.execute("INSERT OR REPLACE INTO meta VALUES ('tool', ?)", (TOOL,))
                db.execute("INSERT OR REPLACE INTO meta VALUES ('created', ?)", (_now(),))
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _use_wal(self) -> None:
        """Switch to WAL, retrying in short waits up to the store's timeout: SQLite may answer a journal-mode
        change with "database is locked" at once, without its busy handler, while other processes create or
        write the same store (seen with four recorders starting together under load)."""
        db = self._db
        deadline = time.monotonic() + self._timeout
        db.execute("PRAGMA busy_timeout = 50")
        try:
            while True:
                try:
                    db.execute("PRAGMA journal_mode = WAL")
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) and "busy" not in str(exc):
                        raise
                    if time.monotonic() >= deadline:
                        raise StoreError(f"store {self.path}: cannot switch it to WAL: {exc}") from exc
                    time.sleep(0.02)
        finally:
            db.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
        db.execute("PRAGMA synchronous = NORMAL")

    @contextlib.contextmanager
    def _write(self):
        """One write transaction holding SQLite's write lock (waits up to the timeout for other writers)."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreError(f"store {self.path}: cannot take the write lock: {exc}") from exc
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # --- writing ----------------------------------------------------------------------------------------------
    def add(self, observations: Iterable[Observation]) -> int:
        """Merge observations in one transaction: new cases are inserted, known ones get their hits added and
        layers merged. Returns how many cases were new."""
        now = _now()
        new = 0
        with self._write():
            for ob in observations:
                key = case_key(ob.fields_json)
                row = self._db.execute(
                    "SELECT layers FROM cases WHERE target = ? AND key = ?", (ob.target, key)
                ).fetchone()
                if row is None:
                    self._db.execute(
                        "INSERT INTO cases (target, key, fields, layers, hits, first_command, first_seen, "
                        "last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            ob.target,
                            key,
                            ob.fields_json,
                            json.dumps(sorted(ob.layers)),
                            ob.hits,
                            ob.command,
                            now,
                            now,
                        ),
                    )
                    new += 1
                else:
                    try:
                        layers = sorted(set(json.loads(row[0])) | ob.layers)
                    except (ValueError, TypeError):
                        raise StoreError(
                            f"store {self.path}: the case of {ob.target} with key {key[:12]} is damaged (layers "
                            f"are not a JSON list); nothing was added"
                        ) from None
                    self._db.execute(
                        "UPDATE cases SET hits = hits + ?, layers = ?, last_seen = ? WHERE target = ? AND key = ?",
                        (ob.hits, json.dumps(layers), now, ob.target, key),
                    )
        return new

    def add_cases(self, cases: Iterable[Case], command: str) -> int:
        """Add whole cases (``import``): their hits, layers and first command are kept when they are new."""
        return self.add(
            Observation(c.target, canonical_json(c.fields), c.hits, set(c.layers), c.first_command or command)
            for c in cases
        )

    def put_verifications(self, rows: Iterable[Verification]) -> None:
        """Write verify runs' totals (one transaction): a row is inserted, or its totals replaced."""
        now = _now()
        with self._write():
            for v in rows:
                self._db.execute(
                    "INSERT INTO verifications (run, target, key, generated, twin_class, checked, passed, "
                    "first_failure, command, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (run, target, key, generated) DO UPDATE SET twin_class = excluded.twin_class, "
                    "checked = excluded.checked, passed = excluded.passed, first_failure = excluded.first_failure, "
                    "last_seen = excluded.last_seen",
                    (
                        v.run,
                        v.target,
                        case_key(v.fields_json),
                        v.generated,
                        v.twin_class,
                        v.checked,
                        v.passed,
                        v.first_failure,
                        v.command,
                        now,
                        now,
                    ),
                )

    # --- reading ----------------------------------------------------------------------------------------------
    def verifications(self, target: str | None = None, run: str | None = None) -> list[Verification]:
        """Verify results (of ``target``, of one ``run``), oldest first; none in a version 1 store."""
        if self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'verifications'").fetchone() is None:
            return []
        sql = (
            "SELECT v.run, v.target, c.fields, v.generated, v.twin_class, v.checked, v.passed, v.first_failure, "
            "v.command, v.last_seen FROM verifications v JOIN cases c ON c.target = v.target AND c.key = v.key"
        )
        where, params = [], []
        if target is not None:
            where.append("v.target = ?")
            params.append(target)
        if run is not None:
            where.append("v.run = ?")
            params.append(run)
        if where:
            sql += " WHERE " + " AND ".join(where)
        return [Verification(*row) for row in self._db.execute(sql + " ORDER BY v.id", params)]

    def cases(self, target: str | None = None) -> list[Case]:
        """Every case (of ``target``), in insertion order."""
        sql = "SELECT id, target, key, fields, hits, first_command, layers, first_seen, last_seen FROM cases"
        rows = (
            self._db.execute(sql + " WHERE target = ? ORDER BY id", (target,))
            if target is not None
            else self._db.execute(sql + " ORDER BY id")
        )
        cases = []
        for rid, t, key, f, hits, cmd, layers, first, last in rows:
            fields, seen = self._verified(rid, t, key, f, layers)
            cases.append(Case(t, fields, hits, cmd, seen, first, last))
        return cases

    def _verified(self, rid: int, target: str, key: str, fields: str, layers: str) -> tuple[dict, tuple]:
        """A row's fields and layers, checked before use: JSON that parses, and fields whose hash is the row's
        key. A damaged row (a torn write, a bit flipped on disk, an edit by hand) raises naming the store and
        the row: it is never listed, exported or emitted as a case that was not recorded."""

        def damaged(what: str) -> StoreError:
            return StoreError(
                f"store {self.path}: case {rid} of {target} is damaged ({what}); nothing was read from it "
                f"(SQLite's own check and every damaged row: CaseStore.check())"
            )

        try:
            parsed = json.loads(fields)
        except ValueError:
            raise damaged("fields are not JSON") from None
        if case_key(fields) != key:
            raise damaged("its fields do not match its key (a torn row)")
        try:
            seen = json.loads(layers)
        except ValueError:
            raise damaged("layers are not JSON") from None
        if not isinstance(parsed, dict) or not isinstance(seen, list):
            raise damaged("fields are not an object or layers not a list")
        return parsed, tuple(seen)

    def targets(self) -> list[tuple[str, int, int]]:
        """``(target, distinct cases, total hits)`` per target, by name."""
        return list(
            self._db.execute("SELECT target, COUNT(*), SUM(hits) FROM cases GROUP BY target ORDER BY target")
        )

    def check(self) -> list[str]:
        """Problems found: SQLite's integrity check, and rows whose JSON does not parse or match their key."""
        problems = [r[0] for r in self._db.execute("PRAGMA integrity_check") if r[0] != "ok"]
        for rid, key, fields in self._db.execute("SELECT id, key, fields FROM cases"):
            try:
                json.loads(fields)
            except ValueError:
                problems.append(f"case {rid}: fields are not JSON")
                continue
            if case_key(fields) != key:
                problems.append(f"case {rid}: key does not match its fields (torn row)")
        return problems

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> CaseStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _check_file(path: Path, create: bool) -> None:
    if path.is_dir():
        raise StoreError(f"store {path}: is a directory, expected an SQLite file")
    if path.exists() and not path.is_file():  # a FIFO would make the open below (and SQLite's) wait forever
        raise StoreError(f"store {path}: is not a regular file, expected an SQLite file")
    if not path.exists():
        if not create:
            raise StoreError(f"store {path}: no such file (record into it first)")
        if not path.parent.is_dir():
            raise StoreError(f"store {path}: folder {path.parent} does not exist")
        return
    with open(path, "rb") as f:
        head = f.read(len(_SQLITE_MAGIC))
    if head and head != _SQLITE_MAGIC:
        raise StoreError(f"store {path}: not a collect-cases store (not an SQLite database)")
