"""A build remembers the patterns it proved to compile; the next build skips their proof.

``opgate._proven_patterns`` keeps one file per regex engine in ``$OPGATE_CACHE_DIR``.
What it holds can only spare a build a regex compile: a file another user could have
written is not read, a broken one is ignored, and the memory can be turned off.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest

import opgate._catalog
import opgate._schema
from opgate import ConfigurationError, Operation, Registry, finish
from opgate import _proven_patterns as proven_patterns
from pattern_support import record_compiles

from conftest import AllowAll

pytestmark = pytest.mark.anyio


def handler(invocation: Any) -> Any:
    return finish("ok")


def operation(name: str, *patterns: str) -> Operation:
    properties = {f"p{i}": {"type": "string", "pattern": p} for i, p in enumerate(patterns)}
    return Operation(
        name, "Test.", handler, input_schema={"type": "object", "properties": properties}
    )


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv(proven_patterns.CACHE_ENV, str(directory))
    return directory


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every pattern the build hands the regex engine to prove, in order."""
    return record_compiles(monkeypatch, opgate._catalog, opgate._schema)


def linear_file(cache: Path) -> Path:
    """Where the linear engine's file goes (the default ``regex_backtrack_limit=None``)."""
    return cache / f"patterns-{proven_patterns._engine_key(None)}.json"


def engine(path: Path) -> str:
    """The engine a file is named for (``patterns-ENGINE.json``)."""
    return path.stem.removeprefix("patterns-")


def remembered(cache: Path) -> list[str]:
    (path,) = cache.glob("patterns-*.json")
    patterns: list[str] = json.loads(path.read_text())["patterns"]
    return patterns


def test_a_second_build_proves_no_pattern_the_first_proved(
    cache: Path, compiled: list[str]
) -> None:
    Registry([operation("a", "^a+$", "^b{1,9}$")], AllowAll())
    assert sorted(compiled) == ["^a+$", "^b{1,9}$"]
    assert remembered(cache) == ["^a+$", "^b{1,9}$"]
    compiled.clear()
    Registry([operation("a", "^a+$"), operation("b", "^b{1,9}$", "^c$")], AllowAll())
    assert compiled == ["^c$"]  # only the new one
    assert remembered(cache) == ["^a+$", "^b{1,9}$", "^c$"]


def test_the_file_is_private_to_this_user(cache: Path) -> None:
    Registry([operation("a", "^a+$")], AllowAll())
    (path,) = cache.glob("patterns-*.json")
    assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE(cache.stat().st_mode) & 0o077 == 0


def test_an_invalid_pattern_is_refused_and_never_remembered(
    cache: Path, compiled: list[str]
) -> None:
    for _ in range(2):
        with pytest.raises(ConfigurationError, match="pattern"):
            Registry([operation("a", "^a+$", "(unclosed")], AllowAll())
    assert "(unclosed" in compiled
    assert not list(cache.glob("patterns-*.json"))  # a failed build writes nothing


def test_an_empty_directory_name_turns_the_memory_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled: list[str]
) -> None:
    monkeypatch.setenv(proven_patterns.CACHE_ENV, "")
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        Registry([operation("a", "^a+$")], AllowAll())
    assert compiled == ["^a+$", "^a+$"]
    assert not list(tmp_path.rglob("patterns-*"))


def test_the_default_directory_follows_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(proven_patterns.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert proven_patterns.cache_directory() == Path("/somewhere/opgate")
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # ignored, as the spec says
    assert proven_patterns.cache_directory() == Path("/home/someone/.cache/opgate")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert proven_patterns.cache_directory() == Path("/home/someone/.cache/opgate")


def test_each_engine_has_its_own_file(cache: Path, compiled: list[str]) -> None:
    Registry([operation("a", "^a+$")], AllowAll())
    Registry([operation("a", "^a+$")], AllowAll(), regex_backtrack_limit=1000)
    assert compiled == ["^a+$", "^a+$"]  # proven once per engine
    assert len(list(cache.glob("patterns-*.json"))) == 2


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda path: os.chmod(path, 0o664), id="group-writable"),
        pytest.param(lambda path: os.chmod(path, 0o646), id="world-writable"),
        pytest.param(lambda path: path.write_text("{not json"), id="not-json"),
        pytest.param(
            lambda path: path.write_text(
                json.dumps({"format": 2, "engine": engine(path), "patterns": ["^a+$"]})
            ),
            id="another-format",
        ),
        pytest.param(
            lambda path: path.write_text(
                json.dumps({"format": 1, "engine": engine(path), "patterns": [1]})
            ),
            id="not-strings",
        ),
        pytest.param(
            lambda path: path.write_text(
                json.dumps({"format": 1, "engine": "0" * 32, "patterns": ["^a+$"]})
            ),
            id="another-engine",
        ),
        pytest.param(lambda path: path.write_text("[" * 200_000), id="nested-too-deep"),
        pytest.param(
            lambda path: path.write_bytes(b" " * (proven_patterns.MAX_FILE_BYTES + 1)),
            id="oversized",
        ),
    ],
)
def test_a_file_that_may_not_be_trusted_is_not_read(
    cache: Path, compiled: list[str], spoil: Any
) -> None:
    Registry([operation("a", "^a+$")], AllowAll())
    (path,) = cache.glob("patterns-*.json")
    spoil(path)
    compiled.clear()
    Registry([operation("a", "^a+$")], AllowAll())
    assert compiled == ["^a+$"]  # proven again


def test_a_symbolic_link_is_not_followed(cache: Path, tmp_path: Path, compiled: list[str]) -> None:
    Registry([operation("a", "^a+$")], AllowAll())
    (path,) = cache.glob("patterns-*.json")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(path.read_bytes())
    elsewhere.chmod(0o600)
    path.unlink()
    path.symlink_to(elsewhere)
    compiled.clear()
    Registry([operation("a", "^a+$")], AllowAll())
    assert compiled == ["^a+$"]


def test_an_unwritable_directory_only_costs_the_proof(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled: list[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(proven_patterns.CACHE_ENV, str(blocker / "cache"))
    for _ in range(2):
        Registry([operation("a", "^a+$")], AllowAll())
    assert compiled == ["^a+$", "^a+$"]


def test_a_union_too_large_keeps_only_what_the_build_proved(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Registry([operation("a", "^" + "a" * 60 + "$")], AllowAll())
    first = remembered(cache)
    size = len(next(cache.glob("patterns-*.json")).read_bytes())
    monkeypatch.setattr(proven_patterns, "MAX_FILE_BYTES", size + 20)
    Registry([operation("b", "^" + "b" * 60 + "$")], AllowAll())
    assert remembered(cache) == ["^" + "b" * 60 + "$"]
    assert first != remembered(cache)


async def test_a_pattern_wrongly_remembered_fails_where_it_is_compiled(cache: Path) -> None:
    """Only this user can write the file; if it claims a pattern compiles that does not,
    the build accepts the schema and the operation's first use fails, never validates."""
    invalid = operation("a", "(unclosed")
    Registry([operation("b", "^b$")], AllowAll())  # makes the file and its directory
    (path,) = cache.glob("patterns-*.json")
    document = json.loads(path.read_text())
    document["patterns"] = ["(unclosed"]
    path.write_text(json.dumps(document))
    registry = Registry([invalid], AllowAll())
    outcome: Any = await registry.invoke(None, "a", {"p0": "x"})
    assert outcome.failure.code == "internal"


def test_a_file_renamed_from_another_engine_is_not_read(cache: Path) -> None:
    """The file names its engine inside: one proven by the backtracking engine, moved to the
    linear engine's name (by this user, or by whoever may rename in a shared directory),
    does not make the linear engine accept a lookaround it refuses."""
    lookaround = operation("a", "(?=a)a")
    Registry([lookaround], AllowAll(), regex_backtrack_limit=1000)
    (fancy,) = cache.glob("patterns-*.json")
    fancy.rename(linear_file(cache))
    with pytest.raises(ConfigurationError, match=r"lookaround|backtrack"):
        Registry([lookaround], AllowAll())


def test_a_fifo_in_place_of_the_file_does_not_hang_the_build(
    cache: Path, compiled: list[str]
) -> None:
    """Whoever may write the directory could leave a FIFO where the file goes: opening it
    for reading would wait for a writer forever."""
    import threading

    cache.mkdir(mode=0o700)
    fifo = linear_file(cache)
    os.mkfifo(fifo, 0o600)
    built = threading.Event()

    def build() -> None:
        Registry([operation("a", "^a+$")], AllowAll())
        built.set()

    worker = threading.Thread(target=build, daemon=True)
    worker.start()
    try:
        assert built.wait(10), "the build waits on the FIFO"
    finally:
        if not built.is_set():  # release the blocked open so the worker can end
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10)
    assert compiled == ["^a+$"]


async def test_a_wrongly_remembered_output_pattern_fails_before_the_handler_runs(
    cache: Path,
) -> None:
    """A wrongly remembered pattern in an output schema must not let the handler act and
    then fail the call: the failure comes first, as for an input schema."""
    from opgate import Result, Text

    ran: list[int] = []

    def acting(invocation: Any) -> Any:
        ran.append(1)
        return finish(Result([Text("done")], structured={"v": "x"}))

    Registry([operation("b", "^b$")], AllowAll())  # makes the file and its directory
    (path,) = cache.glob("patterns-*.json")
    document = json.loads(path.read_text())
    document["patterns"] = ["(unclosed"]
    path.write_text(json.dumps(document))
    output = {"type": "object", "properties": {"v": {"type": "string", "pattern": "(unclosed"}}}
    registry = Registry([Operation("a", "Test.", acting, output_schema=output)], AllowAll())
    outcome: Any = await registry.invoke(None, "a", {})
    assert outcome.failure.code == "internal"
    assert ran == []


DAY = 24 * 3600


def test_files_no_build_used_for_a_month_are_pruned(cache: Path, tmp_path: Path) -> None:
    # Each opgate or jsonschema-rs upgrade names a new engine: the old engines' files
    # would otherwise stay forever.
    Registry([operation("a", "^a+$")], AllowAll())
    (current,) = cache.glob("patterns-*.json")
    stale, recent = cache / f"patterns-{'0' * 32}.json", cache / f"patterns-{'1' * 32}.json"
    # A write's temporary file, its writer gone; a name only like one is not ours.
    descriptor, name = tempfile.mkstemp(dir=cache, prefix=".patterns-")
    os.close(descriptor)
    leftover, lookalike = Path(name), cache / ".patterns-my-notes.txt"
    other, kept_link = cache / "notes.txt", cache / f"patterns-{'2' * 32}.json"
    outside = tmp_path / "outside.json"
    for path in (stale, recent, leftover, lookalike, other, outside):
        path.write_text("{}")
    kept_link.symlink_to(outside)
    old = current.stat().st_mtime - proven_patterns.STALE_SECONDS - DAY
    for path in (stale, leftover, lookalike, other, outside):
        os.utime(path, (old, old))
    os.utime(kept_link, (old, old), follow_symlinks=False)
    Registry([operation("a", "^a+$"), operation("b", "^b$")], AllowAll())  # writes
    assert [p.exists() for p in (stale, leftover)] == [False, False]
    assert [p.exists() for p in (recent, current, lookalike, other, outside)] == [True] * 5
    assert kept_link.is_symlink()


def test_a_build_that_reads_the_file_keeps_it_fresh(cache: Path) -> None:
    Registry([operation("a", "^a+$")], AllowAll())
    (path,) = cache.glob("patterns-*.json")
    old = path.stat().st_mtime - proven_patterns.STALE_SECONDS - DAY
    os.utime(path, (old, old))
    Registry([operation("a", "^a+$")], AllowAll())  # reads it, proves nothing new
    assert path.stat().st_mtime > old + DAY


def test_a_file_marked_within_a_day_is_not_marked_again(cache: Path) -> None:
    # a read writes nothing most of the time (an image's file is not copied up per start)
    Registry([operation("a", "^a+$")], AllowAll())
    (path,) = cache.glob("patterns-*.json")
    recent = path.stat().st_mtime - proven_patterns.MARK_SECONDS / 2
    os.utime(path, (recent, recent))
    Registry([operation("a", "^a+$")], AllowAll())
    assert path.stat().st_mtime == recent


def make_stale(*paths: Path) -> None:
    old = os.stat(paths[0].parent).st_mtime - proven_patterns.STALE_SECONDS - DAY
    for path in paths:
        os.utime(path, (old, old), follow_symlinks=False)


@pytest.mark.skipif(
    not {os.stat, os.unlink} <= os.supports_dir_fd, reason="no removal relative to a descriptor"
)
def test_a_directory_swapped_for_a_link_while_pruning_loses_nothing_elsewhere(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Checked in the directory, the name must be removed there: not in the directory a
    # link put in its place (by whoever may write its parent) points to meanwhile.
    name = f"patterns-{'0' * 32}.json"
    elsewhere = tmp_path / "elsewhere"
    for directory in (cache, elsewhere):
        directory.mkdir()
        (directory / name).write_text("{}")
    make_stale(cache / name)  # elsewhere's is fresh: pruning must not touch it
    is_regular = stat.S_ISREG

    def swap_then_check(mode: int) -> bool:
        if not cache.is_symlink():
            cache.rename(tmp_path / "moved")
            cache.symlink_to(elsewhere)
        return is_regular(mode)

    monkeypatch.setattr(stat, "S_ISREG", swap_then_check)
    proven_patterns._prune(cache, keep=linear_file(cache))
    monkeypatch.undo()
    assert (elsewhere / name).exists()
    assert not (tmp_path / "moved" / name).exists()


@pytest.mark.skipif(getattr(os, "getuid", lambda: 1)() != 0, reason="needs root to chown")
def test_another_users_stale_file_is_left_alone(cache: Path) -> None:
    cache.mkdir()
    theirs = cache / f"patterns-{'0' * 32}.json"
    theirs.write_text("{}")
    os.chown(theirs, 65534, 65534)
    make_stale(theirs)
    Registry([operation("a", "^a+$")], AllowAll())  # writes
    assert theirs.exists()


def test_a_platform_without_removal_by_descriptor_prunes_by_path(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache.mkdir()
    stale, other = cache / f"patterns-{'0' * 32}.json", cache / "notes.txt"
    for path in (stale, other):
        path.write_text("{}")
    make_stale(stale, other)
    monkeypatch.setattr(os, "supports_dir_fd", set())
    Registry([operation("a", "^a+$")], AllowAll())  # writes
    assert [stale.exists(), other.exists()] == [False, True]


def test_a_platform_without_times_set_by_descriptor_marks_by_path(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Windows: a file read daily but written a month ago is another engine's to prune.
    Registry([operation("a", "^a+$")], AllowAll())
    (path,) = cache.glob("patterns-*.json")
    make_stale(path)
    old = path.stat().st_mtime
    monkeypatch.setattr(os, "supports_fd", os.supports_fd - {os.utime})
    Registry([operation("a", "^a+$")], AllowAll())  # reads it, proves nothing new
    assert path.stat().st_mtime > old + DAY


def test_marking_a_file_used_changes_nothing_in_it_and_failing_to_is_silent(
    cache: Path, compiled: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    Registry([operation("a", "^a+$")], AllowAll())
    (path,) = cache.glob("patterns-*.json")
    path.chmod(0o400)  # this user's, read-only: still read, still marked
    before = path.read_bytes()
    make_stale(path)
    old = path.stat().st_mtime
    Registry([operation("a", "^a+$")], AllowAll())
    assert path.read_bytes() == before
    assert path.stat().st_mtime > old + DAY

    def refused(*args: Any, **kwargs: Any) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "utime", refused)
    monkeypatch.setattr(os, "supports_fd", os.supports_fd | {refused})
    compiled.clear()
    Registry([operation("a", "^a+$")], AllowAll())  # read, not marked: still used
    assert compiled == []
