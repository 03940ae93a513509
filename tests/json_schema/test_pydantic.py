"""Pydantic-generated schemas round-trip: `model_dump_json()` output is accepted."""

from __future__ import annotations

import enum
from typing import Literal

from pydantic import BaseModel, Field

from .conftest import Raw


class Color(str, enum.Enum):
    RED = "red"
    GREEN = "green"


class Address(BaseModel):
    street: str
    zip_code: str = Field(pattern=r"^\d{5}$")


class Person(BaseModel):
    name: str = Field(min_length=1, max_length=20)
    age: int = Field(ge=0, lt=150)
    height_m: float | None = None
    color: Color = Color.RED
    kind: Literal["person", "robot"] = "person"
    tags: list[str] = []
    address: Address | None = None
    friends: list[Address] = []


EXAMPLES = [
    Person(name="Ada", age=36),
    Person(
        name="Bob",
        age=0,
        height_m=1.8,
        color=Color.GREEN,
        kind="robot",
        tags=["a", "b"],
        address=Address(street='1 "Main" St', zip_code="12345"),
    ),
    Person(name="Ünïcødé 😀", age=149, friends=[Address(street="x", zip_code="00000")] * 2),
]


def test_pydantic_instances_are_accepted(accepts) -> None:
    check = accepts(Person.model_json_schema())
    for person in EXAMPLES:
        assert check(Raw(person.model_dump_json())), person


def test_pydantic_constraints_are_enforced(accepts) -> None:
    check = accepts(Person.model_json_schema())
    good = EXAMPLES[0].model_dump(mode="json")
    assert check(good)
    assert not check({**good, "age": 150})
    assert not check({**good, "name": ""})
    assert not check({**good, "color": "blue"})
    assert not check({**good, "address": {"street": "x", "zip_code": "1234"}})
    assert not check({**good, "kind": "alien"})
