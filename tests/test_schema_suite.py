"""Conformance of the schema compiler profile against the official JSON-Schema-Test-Suite.

The suite is vendored at ``tests/data/JSON-Schema-Test-Suite`` (its LICENSE and the
upstream commit are in ``SOURCE.md`` there), so a clone anywhere runs it.

Covered: for Draft 2020-12 and draft-07, every required file plus
``optional/bignum.json``; for draft-07 also ``optional/format/*.json``.

Harness conventions:

* Suite files are parsed with opgate's strict parser, without the numeric
  profile; the schema then goes through ``SchemaCompiler.compile`` (which applies
  the profile), and each instance through ``_json.check_profile`` as the library's
  entry points would (an instance outside the profile is rejected, i.e. invalid).
* draft-07 object schemas carry no ``$schema`` in this suite; the harness adds
  ``"$schema": "http://json-schema.org/draft-07/schema#"`` as the suite asks
  harnesses to do. Boolean schemas mean the same in both dialects.
* Schemas compile with the ``OUTPUT`` role (any JSON value). The suite's
  ``remotes/`` are preloaded through the test-only ``resources=`` parameter under
  ``http://localhost:1234/``: the public path never retrieves anything.

Every case must pass, except the groups in ``DELIBERATELY_REJECTED``: those must
be rejected at construction with ``ConfigurationError``; a group that is rejected
but not listed, or listed but not rejected, fails.

``python tests/test_schema_suite.py`` prints the table used in ``docs/conformance.md``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest

from opgate import ConfigurationError
from opgate._json import JSONError, JSONValue, check_profile, parse
from opgate._schema import CompiledSchema, SchemaCompiler, SchemaRole

SUITE = Path(__file__).resolve().parent / "data" / "JSON-Schema-Test-Suite"
REMOTE_BASE = "http://localhost:1234/"
DRAFT_07_URI = "http://json-schema.org/draft-07/schema#"
DRAFTS = ("draft2020-12", "draft7")
# Remote folders holding other dialects' documents: never preloaded.
OTHER_DIALECT_REMOTES = frozenset(
    {"draft3", "draft4", "draft6", "draft7", "draft2019-09", "draft2020-12", "v1"}
)

# Groups the profile rejects at construction on purpose: (draft, file, group description) -> why.
DELIBERATELY_REJECTED: dict[tuple[str, str, str], str] = {
    # Custom meta-schemas (and so vocabularies other than the standard ones) are disabled:
    # only the Draft 2020-12 and draft-07 meta-schemas may be named in $schema.
    (
        "draft2020-12",
        "vocabulary.json",
        "schema that uses custom metaschema with with no validation vocabulary",
    ): "custom meta-schema in $schema (other dialect)",
    (
        "draft2020-12",
        "vocabulary.json",
        "ignore unrecognized optional vocabulary",
    ): "custom meta-schema in $schema (other dialect)",
}


@dataclass(frozen=True)
class Group:
    draft: str
    file: str  # relative to the draft's folder, e.g. "optional/bignum.json"
    index: int
    description: str
    schema: JSONValue
    tests: tuple[tuple[str, JSONValue, bool], ...]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.draft, self.file, self.description)


def _suite_files(draft: str) -> list[Path]:
    folder = SUITE / "tests" / draft
    files = [*sorted(folder.glob("*.json")), folder / "optional" / "bignum.json"]
    if draft == "draft7":
        files += sorted((folder / "optional" / "format").glob("*.json"))
    return files


def _load_groups() -> list[Group]:
    groups: list[Group] = []
    for draft in DRAFTS:
        folder = SUITE / "tests" / draft
        for path in _suite_files(draft):
            content = parse(path.read_bytes())
            assert isinstance(content, list)
            for index, raw in enumerate(content):
                assert isinstance(raw, dict)
                schema = raw["schema"]
                if draft == "draft7" and isinstance(schema, dict) and "$schema" not in schema:
                    schema = {"$schema": DRAFT_07_URI, **schema}
                tests = []
                for case in raw["tests"]:
                    assert isinstance(case, dict)
                    description, valid = case["description"], case["valid"]
                    assert isinstance(description, str)
                    assert isinstance(valid, bool)
                    tests.append((description, case["data"], valid))
                description = raw["description"]
                assert isinstance(description, str)
                groups.append(
                    Group(
                        draft,
                        path.relative_to(folder).as_posix(),
                        index,
                        description,
                        schema,
                        tuple(tests),
                    )
                )
    return groups


def _remotes(draft: str) -> list[tuple[str, JSONValue]]:
    """The suite's remotes/ as (uri, document): shared files and the draft's own folder."""
    root = SUITE / "remotes"
    resources = []
    for path in sorted(root.rglob("*.json")):
        relative = path.relative_to(root)
        top = relative.parts[0]
        if top in OTHER_DIALECT_REMOTES and top != draft:
            continue
        resources.append((REMOTE_BASE + relative.as_posix(), parse(path.read_bytes())))
    return resources


SUITE_PRESENT = (SUITE / "tests").is_dir() and (SUITE / "remotes").is_dir()
GROUPS = _load_groups() if SUITE_PRESENT else []
COMPILERS = (
    {draft: SchemaCompiler(resources=_remotes(draft)) for draft in DRAFTS} if SUITE_PRESENT else {}
)

MISSING = (
    f"the vendored JSON-Schema-Test-Suite was not found at {SUITE} (tests/ and remotes/); "
    "restore tests/data/JSON-Schema-Test-Suite from git"
)


def _compile(group: Group) -> CompiledSchema:
    return COMPILERS[group.draft].compile(
        group.schema, role=SchemaRole.OUTPUT, where=f"{group.draft}/{group.file}"
    )


def _outcome(compiled: CompiledSchema, instance: JSONValue) -> bool:
    """Whether opgate accepts ``instance``: the profile first, then the schema."""
    try:
        check_profile(instance)
    except JSONError:
        return False
    valid = compiled.is_valid(instance)
    # first_violation must agree with is_valid on every suite case.
    assert (compiled.first_violation(instance) is None) == valid
    return valid


def _case_params() -> Iterator[object]:
    if not SUITE_PRESENT:
        yield pytest.param(None, None, id="suite-missing")
        return
    for group in GROUPS:
        for number, (description, _data, _valid) in enumerate(group.tests):
            yield pytest.param(
                group,
                number,
                id=f"{group.draft}/{group.file}::{group.index}:{group.description}::{description}",
            )


def test_suite_is_present() -> None:
    assert SUITE_PRESENT, MISSING
    assert len(GROUPS) > 600


@pytest.mark.parametrize(("group", "number"), list(_case_params()))
def test_case(group: Group | None, number: int | None) -> None:
    assert group is not None, MISSING
    assert number is not None
    description, data, valid = group.tests[number]
    if group.key in DELIBERATELY_REJECTED:
        with pytest.raises(ConfigurationError):
            _compile(group)
        return
    compiled = _compile(group)  # a ConfigurationError here is an unlisted rejection
    assert _outcome(compiled, data) is valid, f"expected valid={valid} for {description!r}"


def test_rejection_table_matches_the_suite() -> None:
    assert SUITE_PRESENT, MISSING
    keys = {group.key for group in GROUPS}
    stale = set(DELIBERATELY_REJECTED) - keys
    assert not stale, f"table entries not in the suite: {sorted(stale)}"
    rejected = set()
    for group in GROUPS:
        try:
            _compile(group)
        except ConfigurationError:
            rejected.add(group.key)
    assert rejected == set(DELIBERATELY_REJECTED)


def test_suite_numbers_are_exact() -> None:
    """bignum.json relies on exact decimals: the parser must not have produced floats."""
    assert SUITE_PRESENT, MISSING
    bignum = [g for g in GROUPS if g.file == "optional/bignum.json"]
    assert bignum
    assert any(isinstance(data, Decimal) for g in bignum for _d, data, _v in g.tests)


# --- the conformance table ------------------------------------------------------------


def _file_group(file: str) -> str:
    return "optional/format/*" if file.startswith("optional/format/") else file


def conformance_rows() -> list[tuple[str, str, int, int, int]]:
    """(draft, file group, cases, passed, deliberately rejected) by running the suite."""
    rows: dict[tuple[str, str], list[int]] = {}
    for group in GROUPS:
        counts = rows.setdefault((group.draft, _file_group(group.file)), [0, 0, 0])
        for _description, data, valid in group.tests:
            counts[0] += 1
            try:
                compiled = _compile(group)
            except ConfigurationError:
                if group.key in DELIBERATELY_REJECTED:
                    counts[2] += 1
                continue
            if group.key not in DELIBERATELY_REJECTED and _outcome(compiled, data) is valid:
                counts[1] += 1
    return [(draft, name, *counts) for (draft, name), counts in rows.items()]  # type: ignore[misc]


def _print_table() -> None:
    rows = conformance_rows()
    print("| draft | file | cases | passed | deliberately rejected |")
    print("| --- | --- | ---: | ---: | ---: |")
    for draft in DRAFTS:
        for row_draft, name, cases, passed, rejected in rows:
            if row_draft == draft:
                print(f"| {draft} | `{name}` | {cases} | {passed} | {rejected} |")
        total = [r for r in rows if r[0] == draft]
        print(
            f"| **{draft}** | **total** | **{sum(r[2] for r in total)}** | "
            f"**{sum(r[3] for r in total)}** | **{sum(r[4] for r in total)}** |"
        )


if __name__ == "__main__":
    if not SUITE_PRESENT:
        sys.exit(MISSING)
    _print_table()
