"""The search indexes of a large catalog are built in child processes.

``opgate._search._index_build``: with at least ``WORKER_MIN`` operations and another
CPU, a registry hands the operations' texts to a child that builds the rule index while
it checks the schemas, and under ``Ranking.RELEVANCE`` (or a ``Hybrid``) to another that
builds the relevance index; ``replace(ranking=...)`` returns before that child answers.
Nothing but the time may depend on it: the same indexes, the same pages, whatever the
children do.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from child_support import fake_python
from opgate import Hybrid, Operation, Ranking, Registry, Result, SearchPage, Text, finish
from opgate import _spawn as spawn
from opgate._search import _index_build as index_build
from opgate._search import _ranking as ranking_module
from opgate._search import _relevance as relevance

from conftest import AllowAll, Ctx

pytestmark = pytest.mark.anyio

WORDS = [
    *("bucket", "object", "policy", "replica", "snapshot", "volume", "cluster", "node"),
    *("queue", "topic", "message", "schedule", "cron", "trigger", "invoice", "payment"),
    *("customer", "refund", "ledger"),
]


def handler(invocation: Any) -> Any:
    return finish(Result([Text("done")]))


def catalog(size: int = 120) -> list[Operation]:
    """Operations whose texts exercise the index: camel-case and compound names,
    groups, repeated documentation, words outside ASCII and the BMP."""
    operations = []
    for i in range(size):
        first, second = WORDS[i % len(WORDS)], WORDS[(i * 7 + 3) % len(WORDS)]
        name = f"{['Get', 'List', 'Delete', 'Put'][i % 4]}{first.title()}{second.title()}{i}"
        operations.append(
            Operation(
                name,
                f"{first} {second} for the {WORDS[(i * 3) % len(WORDS)]}s of a café",
                handler,
                group=["storage", "Billing", "runpagespeed", ""][i % 4],
                description=f"Shared documentation. {first}{second} naïve \U0001d518nicode {i % 5}",
                examples=(f"{second} {first} example",),
            )
        )
    return operations


QUERIES = [
    "bucket",
    "list bucket objects",
    "delete the snapshot of a volume",
    "Is there a way to refund a customer payment?",
    "cafe",
    "naïve",
    "runpagespeed",
    "page speed",
    "cron",
    "queuetopic",
    "invoice ledger schedule",
]


def pages(registry: Registry) -> list[list[str]]:
    """The first two pages of every query, as names."""
    import anyio

    async def run() -> list[list[str]]:
        found = []
        for query in QUERIES:
            page = await registry.search(Ctx(), query, limit=5)
            assert isinstance(page, SearchPage), page
            names = [item.name for item in page.items]
            if page.next_cursor is not None:
                more = await registry.search(Ctx(), query, limit=5, cursor=page.next_cursor)
                assert isinstance(more, SearchPage), more
                names += [item.name for item in more.items]
            found.append(names)
        return found

    return anyio.run(run)


def same_tables(left: dict[str, Any], right: dict[str, Any]) -> bool:
    assert set(left) == set(right)
    for key, value in left.items():
        other = right[key]
        if isinstance(value, np.ndarray):
            if value.dtype != other.dtype or not np.array_equal(value, other):
                return False
        elif value != other:
            return False
    return True


def index_of(registry: Registry) -> relevance.RelevanceIndex:
    ranker = registry._order.ranker
    if isinstance(ranker, ranking_module.PendingRanker):
        ranker = ranker._built()
    if not isinstance(ranker, relevance.RelevanceIndex):
        ranker = ranker._lexical  # a Hybrid's
    assert isinstance(ranker, relevance.RelevanceIndex)
    return ranker


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Builds of any size use a child, whatever this machine's CPUs, and wait for it
    however loaded the machine; the list records whether each child's answer was taken."""
    monkeypatch.setattr(index_build, "WORKER_MIN", 1)
    monkeypatch.setattr(spawn, "cpus", lambda: 2)
    monkeypatch.setattr(index_build, "GRACE", 30.0)
    found: list[bool] = []
    result = index_build.RelevanceBuild.result

    def recorded(self: index_build.RelevanceBuild, rule: Any) -> Any:
        index = result(self, rule)
        found.append(index is not None)
        return index

    monkeypatch.setattr(index_build.RelevanceBuild, "result", recorded)
    return found


def in_process(operations: list[Operation], **options: Any) -> Registry:
    """The registry built without a child."""
    saved = index_build.WORKER_MIN
    index_build.WORKER_MIN = 1 << 60
    try:
        return Registry(operations, AllowAll(), **options)
    finally:
        index_build.WORKER_MIN = saved


def test_the_childs_index_is_the_one_built_in_process(answers: list[bool]) -> None:
    operations = catalog()
    child = Registry(operations, AllowAll(), ranking=Ranking.RELEVANCE)
    assert answers == [True]
    local = in_process(operations, ranking=Ranking.RELEVANCE)
    assert answers == [True]  # no child for that one
    assert same_tables(index_of(child).tables(), index_of(local).tables())
    assert pages(child) == pages(local)
    assert any(len(names) > 5 for names in pages(child))  # queries that page


def test_replace_returns_before_the_index_and_the_first_search_waits_for_it(
    answers: list[bool],
) -> None:
    operations = catalog()
    rule = Registry(operations, AllowAll())
    replaced = rule.replace(ranking=Ranking.RELEVANCE)
    assert isinstance(replaced._order.ranker, ranking_module.PendingRanker)
    assert answers == []  # nothing waited for yet
    local = in_process(operations, ranking=Ranking.RELEVANCE)
    assert pages(replaced) == pages(local)
    assert answers == [True]
    assert same_tables(index_of(replaced).tables(), index_of(local).tables())


def test_threads_searching_first_at_once_build_the_index_once(answers: list[bool]) -> None:
    replaced = Registry(catalog(), AllowAll()).replace(ranking=Ranking.RELEVANCE)
    ranker = replaced._order.ranker
    assert isinstance(ranker, ranking_module.PendingRanker)
    built: list[object] = []
    barrier = threading.Barrier(4)

    def first() -> None:
        barrier.wait()
        built.append(ranker._built())

    threads = [threading.Thread(target=first) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [True]
    assert len(built) == 4
    assert all(index is built[0] for index in built)


def test_a_hybrids_lexical_index_comes_from_the_child(answers: list[bool]) -> None:
    class Lengths:
        name = "lengths"

        def embed(self, texts: Any) -> list[list[float]]:
            return [[float(len(text) % 7), float(len(text) % 3) + 1.0] for text in texts]

    operations = catalog()
    hybrid = Hybrid(Lengths())
    child = Registry(operations, AllowAll(), ranking=hybrid)
    assert answers == [True]
    local = in_process(operations, ranking=hybrid)
    assert same_tables(index_of(child).tables(), index_of(local).tables())
    assert pages(child) == pages(local)


@pytest.mark.parametrize("ranking", [Ranking.RULE, Ranking.RELEVANCE])
def test_another_interpreter_version_refuses_the_childs_answer(
    ranking: Ranking,
    answers: list[bool],
    rule_answers: list[bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``casefold`` follows the Unicode database of the interpreter: a child run by
    another Python (``sys.executable`` replaced meanwhile) builds another index."""
    interpreter = index_build._interpreter()
    monkeypatch.setattr(index_build, "_interpreter", lambda: [*interpreter[:1], "0.0.0"])
    operations = catalog()
    child = Registry(operations, AllowAll(), ranking=ranking)
    assert rule_answers == [False]
    assert answers == ([False] if ranking is Ranking.RELEVANCE else [])
    local = in_process(operations, ranking=ranking)
    assert pages(child) == pages(local)


def test_settings_changed_in_this_process_refuse_the_childs_answer(
    answers: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relevance, "COMPOUNDS", False)
    operations = catalog()
    child = Registry(operations, AllowAll(), ranking=Ranking.RELEVANCE)
    assert answers == [False]  # the child built with COMPOUNDS on
    local = in_process(operations, ranking=Ranking.RELEVANCE)
    assert same_tables(index_of(child).tables(), index_of(local).tables())
    assert pages(child) == pages(local)


@pytest.mark.parametrize(
    "script",
    [
        "exit 3",
        "cat >/dev/null; printf 'not marshal'",
        "cat >/dev/null",
        # a well-formed answer of other modules
        f'cat >/dev/null; {sys.executable} -c "import marshal,sys;'
        "sys.stdout.buffer.write(marshal.dumps({'files':[],'settings':[],"
        "'arrays':{},'values':{}}))\"",
        None,  # cannot start
    ],
)
def test_a_child_without_a_trustworthy_answer_leaves_the_build_to_the_registry(
    script: str | None, answers: list[bool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executable = (
        str(tmp_path / "missing" / "python3") if script is None else fake_python(tmp_path, script)
    )
    monkeypatch.setattr(sys, "executable", executable)
    operations = catalog()
    child = Registry(operations, AllowAll(), ranking=Ranking.RELEVANCE)
    assert answers == ([] if script is None else [False])
    monkeypatch.undo()
    local = in_process(operations, ranking=Ranking.RELEVANCE)
    assert same_tables(index_of(child).tables(), index_of(local).tables())


def test_a_child_still_working_when_the_registry_is_ready_is_killed_after_a_grace(
    answers: list[bool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_build, "GRACE", 0.25)
    pid = tmp_path / "pid"
    monkeypatch.setattr(sys, "executable", fake_python(tmp_path, f"echo $$ > {pid}; exec sleep 30"))
    started = time.monotonic()
    Registry(catalog(), AllowAll(), ranking=Ranking.RELEVANCE)
    assert time.monotonic() - started < 10  # not the child's 30 s
    assert answers == [False]
    if pid.exists():  # else it was killed before its shell ran a line
        with pytest.raises(ProcessLookupError):  # killed and waited for
            os.kill(int(pid.read_text()), 0)


def test_a_build_dropped_unread_kills_its_child(
    answers: list[bool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", fake_python(tmp_path, "exec sleep 30"))
    build = index_build.start_relevance(ranking_module.index_entries(catalog(3)))
    assert build is not None
    process = build._process
    assert process.poll() is None
    del build  # a registry whose build failed after it began
    assert process.returncode is not None  # killed and waited for


def test_no_child_for_a_small_catalog_on_one_cpu_or_under_other_rankings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entries = ranking_module.index_entries(catalog(3))
    assert index_build.start_relevance(entries) is None  # fewer than WORKER_MIN
    monkeypatch.setattr(index_build, "WORKER_MIN", 1)
    monkeypatch.setattr(spawn, "cpus", lambda: 1)
    assert index_build.start_relevance(entries) is None
    monkeypatch.setattr(spawn, "cpus", lambda: 2)
    build = index_build.start_relevance(entries)
    assert build is not None
    del build
    operations = catalog(3)
    snapshotted = Registry(operations, AllowAll())._compiled.entries
    assert ranking_module.start_ranker(Ranking.RULE, snapshotted) is None
    # the rule's replace builds nothing and waits for nothing
    rule = Registry(operations, AllowAll(), ranking=Ranking.RELEVANCE).replace(ranking=Ranking.RULE)
    assert rule._order.ranker is rule._compiled.index


def test_the_child_imports_no_module_from_the_working_directory(
    answers: list[bool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = tmp_path / "ran"
    (tmp_path / "numpy.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    Registry(catalog(), AllowAll(), ranking=Ranking.RELEVANCE)
    assert answers == [True]
    assert not ran.exists()


@pytest.fixture
def rule_answers(answers: list[bool], monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """As ``answers``, for the rule index's children."""
    found: list[bool] = []
    result = index_build.RuleBuild.result

    def recorded(self: index_build.RuleBuild, entries: Any) -> Any:
        index = result(self, entries)
        found.append(index is not None)
        return index

    monkeypatch.setattr(index_build.RuleBuild, "result", recorded)
    return found


RULE_QUERIES = [
    *QUERIES,
    "",
    "b",
    "et",
    "get",
    "café",
    "\U0001d518",
    "shared documentation",
    "e r",
    "Put",
    "example 3",
    "-",
    "storage",
]


def rule_pages(registry: Registry) -> list[list[str]]:
    """Every page of every rule query, and of each under a group filter, as names."""
    import anyio

    async def run() -> list[list[str]]:
        found = []
        for query in RULE_QUERIES:
            for group in ("", "billing"):
                names: list[str] = []
                cursor = None
                while True:
                    page = await registry.search(Ctx(), query, group=group, limit=20, cursor=cursor)
                    assert isinstance(page, SearchPage), page
                    names += [item.name for item in page.items]
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                found.append(names)
        return found

    return anyio.run(run)


def test_the_childs_rule_index_answers_as_the_one_built_in_process(
    rule_answers: list[bool],
) -> None:
    operations = catalog(300)
    child = Registry(operations, AllowAll())
    assert rule_answers == [True]
    local = in_process(operations)
    assert rule_answers == [True]
    assert child._compiled.index._entries == local._compiled.index._entries
    assert rule_pages(child) == rule_pages(local)
    assert sum(map(len, rule_pages(child))) > 1000  # queries that match and page
    # the operations in another order: the child reads them in name order
    shuffled = Registry(list(reversed(operations)), AllowAll())
    assert rule_answers == [True, True]
    assert rule_pages(shuffled) == rule_pages(local)


def test_texts_other_than_the_childs_refuse_its_rule_index(
    rule_answers: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = ranking_module.index_entries(catalog(5))
    build = index_build.start_rule(entries)
    assert build is not None
    process = build._process
    assert build.result(entries[1:]) is None  # what the registry snapshotted differs
    assert process.returncode is not None  # killed and waited for
    assert rule_answers == [False]


def test_a_rule_index_pickle_may_name_only_the_index_classes() -> None:
    import io
    import pickle

    for value in (os.system, print, Registry):
        with pytest.raises(pickle.UnpicklingError, match="not part of a rule index"):
            index_build._RuleUnpickler(io.BytesIO(pickle.dumps(value))).load()


def test_a_build_that_fails_after_its_children_began_leaves_none_running(
    rule_answers: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    from opgate import ConfigurationError

    stopped: list[int] = []
    stop = index_build._stop

    def recorded(process: Any, answer: Any) -> None:
        stop(process, answer)
        stopped.append(process.returncode)

    monkeypatch.setattr(index_build, "_stop", recorded)
    operations = catalog(20)
    with pytest.raises(ConfigurationError, match="not unique"):
        Registry([*operations, operations[3]], AllowAll(), ranking=Ranking.RELEVANCE)
    import gc

    gc.collect()
    assert len(stopped) == 1  # the rule index's child, begun before the checks
    assert rule_answers == []


INDEX_CLASSES = [
    ("opgate._search._index", "SearchIndex", "ranked"),
    ("opgate._search._index", "SearchIndex", "_names"),
    ("opgate._search._name_index", "NameIndex", "_names"),
    ("opgate._search._text_index", "TextIndex", "_blocks"),
    ("opgate._search._group_index", "GroupIndex", "ids"),
    ("opgate._search._postings", "GramIndex", "_trigrams"),
    ("opgate._search._postings", "Postings", "_flat"),
]


@pytest.mark.parametrize(("module", "name", "attribute"), INDEX_CLASSES)
def test_a_refused_rule_index_pickle_leaves_the_index_classes_as_they_were(
    module: str, name: str, attribute: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pickle naming only the allowed globals can BUILD the class object itself:
    the unpickler's default state-setting then does ``setattr(SearchIndex, ...)``,
    process-wide, whether the answer is then refused or not. Every build after it
    (the in-process fallback too) would run the changed class."""
    import contextlib
    import importlib
    import io

    cls = getattr(importlib.import_module(module), name)
    before = dict(vars(cls))
    # GLOBAL module.name; (None, {attribute: None}); BUILD; STOP
    forged = f"c{module}\n{name}\n(N(dV{attribute}\nNstb.".encode()
    try:
        with contextlib.suppress(Exception):  # refused: what counts is what it left
            index_build._RuleUnpickler(io.BytesIO(forged)).load()
        assert dict(vars(cls)) == before
        # and through a child's answer: refused, and the build in process unchanged
        monkeypatch.setattr(index_build, "WORKER_MIN", 1)
        monkeypatch.setattr(spawn, "cpus", lambda: 2)
        monkeypatch.setattr(index_build._ChildBuild, "_answered", lambda self: {"index": forged})
        operations = catalog(40)
        child = Registry(operations, AllowAll())
        monkeypatch.undo()
        assert dict(vars(cls)) == before
        assert rule_pages(child) == rule_pages(in_process(operations))
    finally:  # the rest of the session must not run a changed class
        for key in set(vars(cls)) - set(before):
            delattr(cls, key)
        for key, value in before.items():
            if vars(cls).get(key, object()) is not value:
                setattr(cls, key, value)


@pytest.mark.parametrize("collector", ["enabled", "disabled"])
def test_a_failed_build_reaps_its_child_before_raising(
    collector: str, rule_answers: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule index's child begins before the checks; a build that then fails must
    kill and wait for it when it raises, not when the cyclic collector happens to
    free the error (whose traceback holds the build's frame): a host that keeps the
    error, or runs with the collector off, would otherwise gather a zombie and an
    open answer file per failed build."""
    import gc

    from opgate import ConfigurationError

    stopped: list[int] = []
    stop = index_build._stop

    def recorded(process: Any, answer: Any) -> None:
        stop(process, answer)
        stopped.append(process.returncode)

    monkeypatch.setattr(index_build, "_stop", recorded)
    operations = catalog(20)
    enabled = gc.isenabled()
    if collector == "disabled":
        gc.disable()
    errors = []
    try:
        for _ in range(3):
            try:
                Registry([*operations, operations[3]], AllowAll())
            except ConfigurationError as exc:
                errors.append(exc)  # a host keeping the error to report it
            assert len(stopped) == len(errors)
    finally:
        if enabled:
            gc.enable()
    assert len(errors) == 3
    assert rule_answers == []


def test_texts_changed_to_an_equal_seeming_str_refuse_the_childs_rule_index(
    rule_answers: list[bool],
) -> None:
    """The registry snapshots each operation's texts as it walks them, after the child
    was given them; host code runs in between (a schema given as a host mapping), and
    may change an operation. A text that compares equal to the child's without being
    it (a ``str`` subclass) must not pass for it: the index is of the snapshotted
    texts, as in process."""
    from collections.abc import Iterator, Mapping

    class Seeming(str):
        """Says it equals whatever it is compared with."""

        def __eq__(self, other: object) -> bool:
            return True

        def __ne__(self, other: object) -> bool:
            return False

        __hash__ = str.__hash__

    operations = catalog(40)
    changed = operations[7]

    class Schema(Mapping[str, object]):
        """An input schema whose walk renames another operation's summary."""

        def __getitem__(self, key: str) -> object:
            return {"type": "object"}[key]

        def __iter__(self) -> Iterator[str]:
            object.__setattr__(changed, "summary", Seeming("quetzalcoatl wanders"))
            return iter(["type"])

        def __len__(self) -> int:
            return 1

    first = Operation("AAAFirst", "walked first", handler, input_schema=Schema())
    child = Registry([first, *operations], AllowAll())
    object.__setattr__(changed, "summary", Seeming("quetzalcoatl wanders"))
    local = in_process([first, *operations])
    assert str.__str__(local.spec(changed.name).summary) == "quetzalcoatl wanders"
    import anyio

    async def found(registry: Registry) -> list[str]:
        page = await registry.search(Ctx(), "quetzalcoatl", limit=20)
        assert isinstance(page, SearchPage), page
        return [item.name for item in page.items]

    assert anyio.run(found, local) == [changed.name]
    assert anyio.run(found, child) == [changed.name]  # not the index of what it read
    assert rule_answers == [False]  # what the child read is not what was snapshotted
    assert rule_pages(child) == rule_pages(local)
