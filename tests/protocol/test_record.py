"""``protocol.record``: the value classes the command line's modules use instead of dataclasses."""

from __future__ import annotations

import pytest
from pi_workflows.protocol.record import FrozenInstanceError, record


@record(frozen=True)
class Point:
    x: int
    y: int
    label: str | None = None

    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


@record
class Box:
    items: list[int]
    name: str = "box"


@pytest.mark.timeout(10)
def test_init_takes_positions_keywords_and_defaults() -> None:
    assert Point(1, 2) == Point(x=1, y=2) == Point(1, y=2, label=None)
    assert Point(1, 2, "a").label == "a" and Point(1, 2).norm1() == 3
    with pytest.raises(TypeError):
        Point(1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1, 2, z=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1, 2, "a", "b")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Point(1, 2, x=1)  # type: ignore[misc]


@pytest.mark.timeout(10)
def test_frozen_records_are_immutable_hashable_values() -> None:
    p = Point(1, 2)
    with pytest.raises(FrozenInstanceError):
        p.x = 5  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del p.y  # type: ignore[misc]
    assert hash(p) == hash(Point(1, 2)) and {p, Point(1, 2)} == {p}
    assert p != Point(2, 1) and p != (1, 2, None)
    assert repr(p) == "Point(x=1, y=2, label=None)"
    match p:
        case Point(1, y):
            assert y == 2
        case _:
            pytest.fail("positional match")


@pytest.mark.timeout(10)
def test_a_mutable_record_can_change_and_is_not_hashable() -> None:
    box = Box([1])
    box.items.append(2)
    box.name = "b"
    assert box == Box([1, 2], "b")
    with pytest.raises(TypeError):
        hash(box)


@pytest.mark.timeout(10)
def test_a_field_without_a_default_after_one_with_is_refused() -> None:
    with pytest.raises(TypeError):
        @record
        class Bad:
            a: int = 1
            b: int
