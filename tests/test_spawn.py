"""Whether a build may start a child beside it (``opgate._spawn``).

A child pays only on another CPU, within the cgroup's quota, started by an interpreter
that is Python itself; the builds that use it are tested in ``test_pattern_proof.py``
and ``test_search_index_build.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from opgate import _spawn as spawn


@pytest.mark.parametrize(
    ("quota", "cpus"),
    [
        ("max 100000\n", None),
        ("100000 100000\n", 1),
        ("150000 100000\n", 1),
        ("200000 100000", 2),
        ("garbage", None),
        (None, None),
    ],
)
def test_a_cgroup_quota_below_two_cpus_means_no_child(
    quota: str | None, cpus: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = tmp_path / "cpu.max"
    if quota is not None:
        limit.write_text(quota)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(spawn, "CPU_MAX", str(limit))
    assert spawn.cpus() == (4 if cpus is None else cpus)


def test_the_affinity_mask_counts_when_no_quota_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    monkeypatch.setattr(spawn, "CPU_MAX", str(tmp_path / "absent"))
    assert spawn.cpus() == 1


def test_a_child_needs_two_cpus_and_a_python_interpreter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(spawn, "cpus", lambda: 2)
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3.12")
    monkeypatch.delattr(sys, "frozen", raising=False)
    assert spawn.can_spawn()
    monkeypatch.setattr(spawn, "cpus", lambda: 1)
    assert not spawn.can_spawn()
    monkeypatch.setattr(spawn, "cpus", lambda: 8)
    for executable in ("/usr/bin/uwsgi", "", "/opt/app/gunicorn"):
        monkeypatch.setattr(sys, "executable", executable)
        assert not spawn.can_spawn()
    monkeypatch.setattr(sys, "executable", "/opt/app/Python3")
    assert spawn.can_spawn()
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert not spawn.can_spawn()
