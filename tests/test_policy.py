"""Tests of ``opgate._policy``: the policy protocol and calling its callbacks safely.

``Execute`` is a frozen value whose arguments are one detached copy, made only when
first read; ``DiscoveryScope`` checks its values. A denial (raised or returned
``Failure(UNAVAILABLE)``) is ``unavailable``; anything else a policy raises or returns,
or a scope key that is not a nonempty ``str``, fails the request as ``internal`` with
the cause kept privately, and never as an empty page. Sync and async callbacks alike.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest

from invoke_support import code, invoke, make
from opgate import Completed, Discover, DiscoveryScope, Execute, Failed, Failure, FailureCode
from opgate._policy import PolicyError, discovery_scope, judge_exception, judge_verdict, scope_key
from registry_support import names, registry

from conftest import AllowAll, Ctx, TeamPolicy

pytestmark = pytest.mark.anyio


async def test_execute_denial_is_unavailable_and_sees_detached_validated_arguments() -> None:
    policy = TeamPolicy(deny_execute={"orders.refund"})
    reg, handler = make(policy=policy)
    outcome = await invoke(reg, '{"order": 7}')
    assert code(outcome) is FailureCode.UNAVAILABLE
    assert outcome.failure.message == Failure(FailureCode.UNAVAILABLE).message
    assert handler.calls == []
    executes = [r for r in policy.calls if isinstance(r, Execute)]
    assert executes == [Execute("orders.refund", {"order": 7})]
    assert isinstance(policy.calls[0], Discover)


async def test_policy_mutating_execute_arguments_changes_nothing() -> None:
    class Mutating(AllowAll):
        def authorize(self, ctx: Any, request: Any) -> None:
            if isinstance(request, Execute):
                request.arguments["order"] = 1000

    reg, handler = make(policy=Mutating())
    assert isinstance(await invoke(reg), Completed)
    assert handler.arguments == [{"order": 7}]


async def test_execute_request_is_a_frozen_value_whose_arguments_are_one_detached_copy() -> None:
    seen: list[Execute] = []

    class Reading(AllowAll):
        def authorize(self, ctx: Any, request: Any) -> None:
            if isinstance(request, Execute):
                seen.append(request)
                request.arguments["order"] = 1000  # the policy's own copy
                assert request.arguments["order"] == 1000  # read again: the same copy

    reg, handler = make(policy=Reading())
    assert isinstance(await invoke(reg), Completed)
    assert handler.arguments == [{"order": 7}]
    request = seen[0]
    assert request == Execute("orders.refund", {"order": 1000})
    assert request != Execute("orders.refund", {"order": 7})
    assert repr(request) == "Execute(name='orders.refund', arguments={'order': 1000})"
    match request:
        case Execute(name, arguments):
            assert (name, arguments) == ("orders.refund", {"order": 1000})
    with pytest.raises(AttributeError):
        request.name = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        request.arguments = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        hash(request)


async def test_execute_arguments_are_copied_only_when_the_policy_reads_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 64 KiB of small containers cost milliseconds to copy (issue 9): a policy that
    # never reads them must not pay for it. Counted with the copy function itself,
    # wherever the request is built.
    from opgate import _invoke, _json, _policy

    copies: list[object] = []

    def counting(value: Any) -> Any:
        copies.append(value)
        return _json.detach(value)

    for module in (_policy, _invoke):
        monkeypatch.setattr(module, "detach", counting, raising=False)
    reg, _ = make()
    assert isinstance(await invoke(reg), Completed)
    assert copies == []
    reg, _ = make(policy=TeamPolicy(deny_execute={"orders.refund"}))
    await invoke(reg)
    assert copies == []  # TeamPolicy reads only the name


async def test_execute_requests_pickle_and_copy_like_the_frozen_dataclass_they_were() -> None:
    # The hand-written request kept the dataclass's slots but not its __getstate__ /
    # __setstate__: pickle, copy.copy and copy.deepcopy restored the slots through
    # __setattr__, which raises FrozenInstanceError (a policy that logs, queues or
    # copies its requests failed as internal).
    import copy
    import pickle

    seen: list[Execute] = []

    class Keeping(AllowAll):
        def authorize(self, ctx: Any, request: Any) -> None:
            if isinstance(request, Execute):
                seen.append(request)
                seen.append(copy.copy(request))  # before the arguments are first read

    reg, handler = make(policy=Keeping())
    assert isinstance(await invoke(reg), Completed)
    assert handler.arguments == [{"order": 7}]
    for request in (*seen, Execute("orders.refund", {"order": 7})):
        for twin in (
            pickle.loads(pickle.dumps(request)),
            copy.copy(request),
            copy.deepcopy(request),
        ):
            assert type(twin) is Execute
            assert twin == request
            assert repr(twin) == "Execute(name='orders.refund', arguments={'order': 7})"
    request = Execute("x", {"a": [1]})
    assert copy.copy(request).arguments is request.arguments  # shallow, as a dataclass
    assert copy.deepcopy(request).arguments["a"] is not request.arguments["a"]


def test_execute_arguments_read_first_by_two_threads_at_once_are_one_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A sync policy runs inline, but may hand the request to threads: two first reads
    # at once each made a copy (the policy's changes through one were lost to the
    # other), and a read that came after the other's copy but saw no copy yet failed
    # its assertion (AssertionError; under -O the arguments were None).
    from opgate import _json, _policy

    both_inside = threading.Barrier(2)

    def slow_detach(value: Any) -> Any:
        with contextlib.suppress(threading.BrokenBarrierError):
            both_inside.wait(timeout=0.5)  # a second first read joins here, if it can
        return _json.detach(value)

    monkeypatch.setattr(_policy, "detach", slow_detach)
    request = Execute._of_validated("orders.refund", {"order": 7})
    read: list[dict[str, Any]] = []
    threads = [threading.Thread(target=lambda: read.append(request.arguments)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(read) == 2
    assert read[0] is read[1] is request.arguments
    assert request.arguments == {"order": 7}


async def test_policy_failure_at_execute_is_internal() -> None:
    class Exploding(AllowAll):
        def authorize(self, ctx: Any, request: Any) -> None:
            if isinstance(request, Execute):
                raise ValueError("password=hunter2")

    reg, handler = make(policy=Exploding())
    outcome = await invoke(reg)
    assert code(outcome) is FailureCode.INTERNAL
    assert "hunter2" not in str(outcome.failure)
    assert handler.calls == []


class Broken:
    def __init__(self, scope: Any = "k", verdict: Any = None, error: BaseException | None = None):
        self.scope, self.verdict, self.error = scope, verdict, error

    def scope_key(self, ctx: Any) -> Any:
        return self.scope

    def authorize(self, ctx: Any, request: Any) -> Any:
        if self.error is not None:
            raise self.error
        return self.verdict


@pytest.mark.parametrize(
    "policy",
    [
        Broken(error=RuntimeError("secret database password in message")),
        Broken(verdict=True),
        Broken(verdict=False),
        Broken(verdict="yes"),
        Broken(error=Failure(FailureCode.BUSY)),
        Broken(scope=""),
        Broken(scope=None),
        Broken(scope=42),
    ],
)
async def test_broken_policy_fails_internal_never_empty_page(policy: Broken) -> None:
    reg = registry(policy=policy)
    for outcome in (await reg.search(Ctx(), ""), await reg.inspect(Ctx(), "orders.refund")):
        assert isinstance(outcome, Failed)
        assert outcome.failure.code is FailureCode.INTERNAL
        assert "secret" not in str(outcome.failure)
        assert "secret" not in repr(outcome.failure)
        assert outcome.failure.cause is not None


async def test_scope_key_exception_kept_privately() -> None:
    class KeyFails(AllowAll):
        def scope_key(self, ctx: Any) -> str:
            raise KeyError("alice-token-123")

    outcome = await registry(policy=KeyFails()).search(Ctx(), "")
    assert isinstance(outcome, Failed)
    assert outcome.failure.code is FailureCode.INTERNAL
    assert "alice-token-123" not in str(outcome.failure)
    assert isinstance(outcome.failure.cause, KeyError)


async def test_async_policy_and_returned_denial() -> None:
    class AsyncPolicy:
        async def scope_key(self, ctx: Ctx) -> str:
            return ctx.principal

        async def authorize(self, ctx: Ctx, request: Any) -> Failure | None:
            if request.name.startswith("orders."):
                return Failure(FailureCode.UNAVAILABLE)
            return None

    reg = registry(policy=AsyncPolicy())
    assert "orders.refund" not in await names(reg, Ctx(), "", limit=20)
    assert "billing.invoice" in await names(reg, Ctx(), "", limit=20)


async def test_slow_async_policy_is_awaited() -> None:
    import anyio

    class Slow(AllowAll):
        async def authorize(self, ctx: Any, request: Any) -> None:
            await anyio.sleep(0.01)

    assert await names(registry(policy=Slow()), Ctx(), "orders.refund") == ["orders.refund"]


def test_scope_values_are_checked() -> None:
    with pytest.raises(TypeError):
        DiscoveryScope(groups="billing")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        DiscoveryScope(prefixes="billing.")  # type: ignore[arg-type]
    scope = DiscoveryScope(groups=frozenset({"Billing"}), prefixes=("a.", "a."))
    assert scope.prefixes == ("a.",)
    assert scope.admits("x.y", "BILLING")
    assert scope.admits("a.b", "")
    assert not scope.admits("b", "")


# --- the judgements, on their own ------------------------------------------------------------


def test_a_returned_verdict_allows_denies_or_breaks() -> None:
    assert judge_verdict(None) is True
    assert judge_verdict(Failure(FailureCode.UNAVAILABLE, "not yours")) is False
    for verdict in (True, False, "yes", Failure(FailureCode.BUSY)):
        with pytest.raises(PolicyError) as broken:
            judge_verdict(verdict)
        assert broken.value.failure.code is FailureCode.INTERNAL
        assert isinstance(broken.value.failure.cause, TypeError)


def test_a_raised_exception_denies_breaks_or_propagates() -> None:
    assert judge_exception(Failure(FailureCode.UNAVAILABLE)) is False
    error = ValueError("password=hunter2")
    with pytest.raises(PolicyError) as broken:
        judge_exception(error)
    assert broken.value.failure.code is FailureCode.INTERNAL
    assert broken.value.failure.cause is error
    assert "hunter2" not in broken.value.failure.message
    busy = Failure(FailureCode.BUSY)
    with pytest.raises(PolicyError) as broken:
        judge_exception(busy)
    assert broken.value.failure.cause is busy
    for stop in (KeyboardInterrupt(), SystemExit(1)):
        with pytest.raises(type(stop)):
            judge_exception(stop)


async def test_a_scope_key_comes_back_as_a_plain_str() -> None:
    class Shouting(str):
        def __str__(self) -> str:
            return self.upper()

    class Keyed(AllowAll):
        def scope_key(self, ctx: Any) -> str:
            return Shouting("alice")

    key = await scope_key(Keyed(), None)
    assert type(key) is str
    assert key == "alice"


async def test_without_the_optional_hook_discovery_is_not_narrowed() -> None:
    assert await discovery_scope(AllowAll(), None) is None

    class Narrowing(AllowAll):
        async def discovery_scope(self, ctx: Any) -> DiscoveryScope:
            return DiscoveryScope(prefixes=("orders.",))

    assert await discovery_scope(Narrowing(), None) == DiscoveryScope(prefixes=("orders.",))
