"""The steps of search and inspect that ask the policy about catalog entries.

``discoverable`` finds an operation by exact name and admits it only if the
principal's discovery scope and ``authorize(ctx, Discover(name))`` do: inspect and
invoke both start with it. ``exact_page`` is search's answer when the query is an
authorized operation's name; ``ranked_page`` fills a page in rank order, asking the
policy about every candidate it considers (search's hot path). ``Registry.search``
sequences them; ``operation_spec`` is what inspect returns for an entry.
"""

from __future__ import annotations

import heapq
import inspect
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._catalog import Entry
from .._execution import is_own_close
from .._failures import Failure, FailureCode
from .._limits import PAGE_BYTES, PAGE_RESERVE_BYTES
from .._operation import OperationSpec, SearchPage, Summary
from .._policy import (
    DiscoveryScope,
    Policy,
    PolicyError,
    authorize,
    discovery_scope,
    judge_exception,
    judge_verdict,
)
from ._cursor import CursorBinding, CursorSealer
from ._index import SearchIndex, fold_group
from ._ranking import Ranker, ranked_by

__all__ = [
    "GROUPS_CHECKED",
    "GroupMembers",
    "discoverable",
    "discoverable_groups",
    "exact_page",
    "group_members",
    "operation_spec",
    "ranked_page",
]

#: Most operations ``discoverable_groups`` asks the policy about: one request never
#: costs more policy calls than a few pages of a denying policy's search.
GROUPS_CHECKED = 1024


async def discoverable(
    policy: Policy, entries: tuple[Entry, ...], positions: Mapping[str, int], ctx: Any, name: object
) -> Entry | None:
    """The entry named ``name`` if ``ctx``'s principal may discover it, else ``None``."""
    position = positions.get(name) if isinstance(name, str) else None
    if position is None:
        return None
    entry = entries[position]
    scope = await discovery_scope(policy, ctx)
    if scope is not None and not scope.admits(entry.name, entry.group):
        return None
    if not await authorize(policy, ctx, entry.discover):
        return None
    return entry


async def exact_page(
    policy: Policy,
    entries: tuple[Entry, ...],
    index: SearchIndex,
    ctx: Any,
    binding: CursorBinding,
    scope: DiscoveryScope | None,
) -> SearchPage | None:
    """The page holding only the operation the query names, if the principal may see it."""
    position = index.exact(binding.query)
    if position is None:
        return None
    entry = entries[position]
    if binding.group and fold_group(entry.group) != binding.group:
        return None
    if scope is not None and not scope.admits(entry.name, entry.group):
        return None
    if not await authorize(policy, ctx, entry.discover):
        return None
    return SearchPage((entry.summary_item,))


async def ranked_page(
    policy: Policy,
    entries: tuple[Entry, ...],
    index: SearchIndex,
    ranker: Ranker,
    cursors: CursorSealer,
    ctx: Any,
    binding: CursorBinding,
    after: tuple[int, str] | None,
    size: int,
    scope: DiscoveryScope | None,
) -> SearchPage:
    """Place authorized candidates in rank order until the page or its budget is full.

    Search asks the policy for every candidate it considers, so this loop is the
    hot path: a sync policy's verdict is judged inline, without a coroutine.
    """
    budget = PAGE_BYTES - PAGE_RESERVE_BYTES
    check = policy.authorize
    items: list[Summary] = []
    used = 0
    last: tuple[int, int] | None = None  # (tier, catalog position) of the last item
    unavailable_code = FailureCode.UNAVAILABLE
    # A discovery scope narrows the candidates inside the index, before any policy call.
    within = None if scope is None else index.scope(scope.groups, scope.prefixes)
    ranked = ranked_by(ranker, index, binding.query, binding.group, after, within)
    for tier, position in ranked:
        entry = entries[position]
        if len(items) == size or used + entry.item_bytes > budget:
            # A further candidate exists: continue after the last placed item.
            assert last is not None  # every item fits an empty page (checked at startup)
            return SearchPage(tuple(items), cursors.seal(binding, last))
        try:
            verdict = check(ctx, entry.discover)
            if verdict is not None:
                if type(verdict) is Failure and verdict.code is unavailable_code:
                    continue  # the usual denial, judged inline
                if inspect.isawaitable(verdict):
                    verdict = await verdict
                if not (verdict is None or judge_verdict(verdict)):
                    continue
        except PolicyError:
            raise
        except BaseException as exc:
            if is_own_close(exc):
                raise
            if not judge_exception(exc):
                continue
        items.append(entry.summary_item)
        used += entry.item_bytes
        last = (tier, position)
    return SearchPage(tuple(items))


@dataclass(frozen=True, slots=True)
class GroupMembers:
    """The catalog's groups, each with the positions of its entries in catalog order;
    groups in the order of their first entry. ``group_members(entries)`` builds it
    once per catalog, so ``discoverable_groups`` never walks the entries of a group
    it has already found."""

    folded: tuple[str, ...]
    members: tuple[array[int], ...]


def group_members(entries: tuple[Entry, ...]) -> GroupMembers:
    """The ``GroupMembers`` of ``entries`` (entries without a group belong to none)."""
    members: dict[str, array[int]] = {}
    for position, entry in enumerate(entries):
        folded = fold_group(entry.group)
        if folded:
            found = members.get(folded)
            if found is None:
                members[folded] = found = array("i")
            found.append(position)
    return GroupMembers(tuple(members), tuple(members.values()))


async def discoverable_groups(
    policy: Policy, entries: tuple[Entry, ...], groups: GroupMembers, ctx: Any, limit: int
) -> tuple[str, ...]:
    """The groups (at most ``limit``, sorted case-folded) holding an operation ``ctx``'s principal
    may discover: its discovery scope admits it and ``authorize(ctx, Discover(name))``
    allows it. Each group is judged by its operations in catalog order until one is
    allowed, asking about at most ``GROUPS_CHECKED`` operations in all, so a principal
    denied most of a large catalog may get fewer groups than it could discover; an
    operation without a group names none. Never names a group the principal cannot
    discover an operation of.

    The entries are taken in catalog order, skipping those of groups already found: a
    merge of the groups' member lists, so the cost grows with the groups and the
    operations asked about, not with the catalog."""
    scope = await discovery_scope(policy, ctx)
    found: dict[str, str] = {}  # folded group -> its spelling
    asked = 0
    folded, members = groups.folded, groups.members
    waiting: list[tuple[int, int, int]] = []  # (position, group, index in its members)
    joined = 0  # groups before this one are in ``waiting`` or found
    while len(found) < limit and asked < GROUPS_CHECKED:
        if joined < len(members) and (not waiting or members[joined][0] < waiting[0][0]):
            position, group, index = members[joined][0], joined, 0
            joined += 1
        elif waiting:
            position, group, index = heapq.heappop(waiting)
        else:
            break
        entry = entries[position]
        if scope is None or scope.admits(entry.name, entry.group):
            asked += 1
            if await authorize(policy, ctx, entry.discover):
                found[folded[group]] = entry.group
                continue
        if index + 1 < len(members[group]):
            heapq.heappush(waiting, (members[group][index + 1], group, index + 1))
    return tuple(found[name] for name in sorted(found))


def operation_spec(entry: Entry) -> OperationSpec:
    """What inspect returns: the entry's full definition, schemas included."""
    output = entry.output_schema
    return OperationSpec(
        name=entry.name,
        group=entry.group,
        summary=entry.summary,
        description=entry.description,
        examples=entry.examples,
        _input_schema=entry.input_schema.document(),
        _output_schema=None if output is None else output.document(),
    )
