from opgate._json import canonical_bytes, parse


def test_equal_numbers_share_canonical_bytes() -> None:
    assert {canonical_bytes(parse(t)) for t in ["1", "1.0", "1e0", "10e-1"]} == {b"1"}
