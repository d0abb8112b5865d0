"""A build's new patterns are proven in a child process beside the index build.

``opgate._pattern_proof``: with at least ``WORKER_MIN`` new patterns and another CPU,
the child compiles them while the build indexes the catalog. Nothing but the time may
depend on it: the same registries are built and the same errors raised with or
without the child, whatever the child does.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import opgate._catalog
from child_support import fake_python
from opgate import Completed, ConfigurationError, Failed, Operation, Registry, Result, Text, finish
from opgate import _pattern_proof as pattern_proof
from opgate import _proven_patterns as proven_patterns
from opgate import _spawn as spawn
from opgate._limits import DEFAULT_LIMITS
from pattern_support import record_compiles

from conftest import AllowAll, Ctx

pytestmark = pytest.mark.anyio


def handler(invocation: Any) -> Any:
    return finish(Result([Text("done")]))


def operation(name: str, *patterns: str, summary: str = "Test.") -> Operation:
    properties = {f"p{i}": {"type": "string", "pattern": p} for i, p in enumerate(patterns)}
    return Operation(
        name, summary, handler, input_schema={"type": "object", "properties": properties}
    )


#: Forty distinct valid patterns over twenty operations.
PATTERNS = [(f"^a{{{i + 1}}}$", f"^[b-z]{{1,{i + 2}}}$") for i in range(20)]


def catalog(*extra: Operation) -> list[Operation]:
    """Twenty operations of the patterns above, then ``extra``."""
    return [operation(f"op{i:02}", *pair) for i, pair in enumerate(PATTERNS)] + list(extra)


@pytest.fixture(autouse=True)
def no_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every build proves its patterns (none remembered)."""
    monkeypatch.setenv(proven_patterns.CACHE_ENV, "")


def use_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds hand their new patterns to a child, whatever this machine's CPUs, and wait
    for its answer however loaded the machine (a test of the grace sets its own)."""
    monkeypatch.setattr(pattern_proof, "WORKER_MIN", 1)
    monkeypatch.setattr(spawn, "cpus", lambda: 2)
    monkeypatch.setattr(pattern_proof, "GRACE", 30.0)


@pytest.fixture
def child(monkeypatch: pytest.MonkeyPatch) -> list[bool | None]:
    """The child's answers, in order (builds use it)."""
    use_the_child(monkeypatch)
    answers: list[bool | None] = []
    result = pattern_proof.PatternProof.result

    def recorded(self: pattern_proof.PatternProof) -> bool | None:
        answer = result(self)
        answers.append(answer)
        return answer

    monkeypatch.setattr(pattern_proof.PatternProof, "result", recorded)
    return answers


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The patterns this process compiles together at the end of a build."""
    return record_compiles(monkeypatch, opgate._catalog)


def refusal(operations: list[Operation], **options: Any) -> str:
    with pytest.raises(ConfigurationError) as caught:
        Registry(operations, AllowAll(), **options)
    return str(caught.value)


async def test_the_child_proves_the_patterns_and_the_build_does_not(
    child: list[bool | None], in_process: list[str]
) -> None:
    registry = Registry(catalog(), AllowAll())
    assert child == [True]
    assert in_process == []
    # the patterns are in force
    assert isinstance(await registry.invoke(Ctx(), "op02", '{"p0": "aaa"}'), Completed)
    refused = await registry.invoke(Ctx(), "op02", '{"p0": "aa"}')
    assert isinstance(refused, Failed)
    assert refused.failure.code == "invalid_arguments"


def test_without_the_child_the_build_proves_them_at_once(
    child: list[bool | None], in_process: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pattern_proof, "WORKER_MIN", 41)  # one more than the catalog has
    Registry(catalog(), AllowAll())
    assert child == []
    assert sorted(in_process) == sorted(p for pair in PATTERNS for p in pair)


@pytest.mark.parametrize(
    "extra",
    [
        [operation("zz", "(unclosed")],
        [operation("aa", "(unclosed"), operation("op05", "^x$")],
        [operation("op05", "^x$"), operation("zz", "(unclosed")],
        [operation("zz", "^ok$", "^(?=a)a$")],
        [operation("zz", "\ud800")],
        [operation("zz", "(unclosed", summary="x" * 100_000)],
        [operation("zz", "^(x{1,1000}){1,1000}$")],
        [operation("zz", "(unclosed"), 42],
    ],
    ids=[
        "invalid",
        "invalid-then-repeated-name",
        "repeated-name-then-invalid",
        "lookahead",
        "lone-surrogate",
        "invalid-and-over-the-page",
        "over-the-size-limit",
        "invalid-then-not-an-operation",
    ],
)
def test_the_error_is_the_one_a_build_proving_as_it_goes_raises(
    extra: list[Operation], monkeypatch: pytest.MonkeyPatch
) -> None:
    operations = catalog(*extra)
    with pytest.raises((ConfigurationError, TypeError)) as expected:
        # each schema's patterns compiled as it is checked, in the host's order
        opgate._catalog._snapshot_all(operations, DEFAULT_LIMITS, None, frozenset(), defer=False)
    for child in (False, True):
        if child:
            use_the_child(monkeypatch)
        with pytest.raises((ConfigurationError, TypeError)) as raised:
            Registry(operations, AllowAll())
        assert type(raised.value) is type(expected.value)
        assert str(raised.value) == str(expected.value)


class BrokenMapping(Mapping[str, object]):
    """A host's schema mapping that fails when read."""

    def __getitem__(self, key: str) -> object:
        raise LookupError("the host's mapping failed")

    def __iter__(self) -> Iterator[str]:
        raise LookupError("the host's mapping failed")

    def __len__(self) -> int:
        return 1


def then_failing(operations: list[Operation]) -> Iterator[Operation]:
    """The host's catalog source: ``operations``, then a failure."""
    yield from operations
    raise LookupError("the host's catalog source failed")


@pytest.mark.parametrize("source", ["mapping", "iterable"])
def test_a_host_failure_after_an_invalid_pattern_is_not_what_is_raised(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sequential build refused 'aa' before it read anything of the host's that fails.
    invalid = operation("aa", "(unclosed")
    for child in (False, True):
        if child:
            use_the_child(monkeypatch)
        if source == "mapping":
            broken = Operation("zz", "Test.", handler, input_schema=BrokenMapping())
            operations: Any = catalog(invalid, broken)
        else:
            operations = then_failing(catalog(invalid))
        assert "operation 'aa' input_schema" in refusal(operations)
    # with no pattern to blame, the host's failure is raised
    with pytest.raises(LookupError, match="catalog source"):
        Registry(then_failing(catalog()), AllowAll())


def test_the_child_compiles_with_the_builds_engine(child: list[bool | None]) -> None:
    operations = catalog(operation("zz", "^(?=a)a+$"))
    assert "zz" in refusal(operations)  # the linear engine: no lookaround
    assert child == [False]
    Registry(operations, AllowAll(), regex_backtrack_limit=1000)  # the backtracking one
    assert child == [False, True]


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "not json",
        "[]",
        '{"engine": false, "compiled": true}',
        '{"engine": true, "compiled": 1}',
        '{"compiled": true}',
    ],
)
def test_a_child_without_a_trustworthy_answer_leaves_the_proof_to_the_build(
    answer: str,
    child: list[bool | None],
    in_process: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executable = fake_python(tmp_path, f"cat >/dev/null; printf '%s' '{answer}'")
    monkeypatch.setattr(sys, "executable", executable)
    Registry(catalog(), AllowAll())
    assert child == [None]
    assert len(in_process) == 40
    assert "'zz'" in refusal(catalog(operation("zz", "(unclosed")))


@pytest.mark.parametrize("script", ["exit 3", "cat >/dev/null; exec sleep 5", None])
def test_a_child_that_fails_hangs_or_cannot_start_leaves_the_proof_to_the_build(
    script: str | None,
    child: list[bool | None],
    in_process: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pattern_proof, "TIMEOUT", 0.5)
    executable = (
        str(tmp_path / "missing" / "python3") if script is None else fake_python(tmp_path, script)
    )
    monkeypatch.setattr(sys, "executable", executable)
    Registry(catalog(), AllowAll())
    assert child == [None]
    assert len(in_process) == 40


def test_no_child_on_one_cpu_or_without_a_python_interpreter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_the_child(monkeypatch)
    assert pattern_proof.start_proof(["^a$"], None) is not None
    assert pattern_proof.start_proof([], None) is None  # fewer than WORKER_MIN
    monkeypatch.setattr(spawn, "cpus", lambda: 1)
    assert pattern_proof.start_proof(["^a$"], None) is None
    monkeypatch.setattr(spawn, "cpus", lambda: 2)
    for executable in ("/usr/bin/uwsgi", ""):
        monkeypatch.setattr(sys, "executable", executable)
        assert pattern_proof.start_proof(["^a$"], None) is None
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/app/python3")
    assert pattern_proof.start_proof(["^a$"], None) is None


def test_a_proven_build_is_remembered_once_the_child_answered(
    child: list[bool | None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(proven_patterns.CACHE_ENV, str(tmp_path))
    Registry(catalog(), AllowAll())
    assert child == [True]
    assert proven_patterns.load_proven(None) == {p for pair in PATTERNS for p in pair}
    refusal(catalog(operation("zz", "^new$", "(unclosed")))
    assert child == [True, False]
    assert "^new$" not in proven_patterns.load_proven(None)  # a failed build writes nothing
    Registry(catalog(), AllowAll())
    assert child == [True, False]  # nothing new to prove: no child


def test_the_child_imports_no_module_from_the_working_directory(
    child: list[bool | None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``python -c``, a REPL or a notebook has "" on sys.path; this process imported
    # jsonschema-rs before it moved to a directory it does not control, but a child
    # handed "" would import this one, which even names the real file.
    ran = tmp_path / "ran"
    (tmp_path / "jsonschema_rs.py").write_text(
        f"__file__ = {pattern_proof._engine_file()!r}\n"
        f"open({str(ran)!r}, 'w').close()\n"
        "class RegexOptions: pass\n"
        "class Draft202012Validator:\n"
        "    def __init__(self, *args, **kwargs): pass\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    assert "'zz'" in refusal(catalog(operation("zz", "(unclosed")))
    assert child == [False]
    assert not ran.exists()


def test_the_child_writes_no_bytecode(
    child: list[bool | None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PYTHONDONTWRITEBYTECODE and PYTHONPYCACHEPREFIX do not reach a child run with -I.
    import shutil

    engine = Path(pattern_proof._engine_file()).parent
    copy = tmp_path / "site" / "jsonschema_rs"
    shutil.copytree(engine, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(pattern_proof, "_engine_file", lambda: str(copy / "__init__.py"))
    monkeypatch.setattr(sys, "path", [str(copy.parent), *sys.path])
    Registry(catalog(), AllowAll())
    assert child == [True]  # the copy, as a child finds it from its folder
    assert not (copy / "__pycache__").exists()


def test_a_child_still_working_when_the_build_is_ready_is_killed_after_a_grace(
    child: list[bool | None], in_process: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pattern_proof, "GRACE", 0.25)
    pid = tmp_path / "pid"
    monkeypatch.setattr(sys, "executable", fake_python(tmp_path, f"echo $$ > {pid}; exec sleep 30"))
    started = time.monotonic()
    Registry(catalog(), AllowAll())
    assert time.monotonic() - started < 10  # not the child's 30 s, nor TIMEOUT's 60
    assert child == [None]
    assert len(in_process) == 40
    if pid.exists():  # else it was killed before its shell ran a line
        with pytest.raises(ProcessLookupError):  # killed and waited for
            os.kill(int(pid.read_text()), 0)
