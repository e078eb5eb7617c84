"""The client's classes against the published contract (docs/contract/contract.json): no server needed.

The contract is made from tablefate's code (and a test there keeps the published copy equal to it): this keeps the
Python side equal to the contract, so that a change to a call shows here as a failure, not in a service at runtime.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import pytest

from tablefate import ERRORS, CONTRACT_VERSION, NEXUS_SERVICE, EffectiveSetting, LeaseInfo, TableInfo, workflow_type
from tablefate.calls import ANSWERS
from tablefate.errors import OPERATION_FAILURE_TYPES

CONTRACT = json.loads((Path(__file__).resolve().parents[3] / "docs" / "contract" / "contract.json").read_text())
OPERATIONS = {op["name"]: op for op in CONTRACT["operations"]}


def snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def test_the_client_makes_every_call_of_the_contract_as_its_workflow_type_and_nexus_operation():
    assert CONTRACT["version"] == CONTRACT_VERSION
    assert CONTRACT["service"] == NEXUS_SERVICE
    assert sorted(ANSWERS) == sorted(OPERATIONS)
    for name, op in OPERATIONS.items():
        assert op["workflowType"] == workflow_type(name)
        assert op["nexus"]["operation"] == name


@pytest.mark.parametrize(
    "cls, call",
    [(TableInfo, "describe"), (LeaseInfo, "acquireLease"), (EffectiveSetting, "setSetting")],
)
def test_each_answer_class_has_the_fields_of_the_contracts_answer(cls, call):
    schema = OPERATIONS[call]["output"]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    assert sorted(fields) == sorted(snake(key) for key in schema["properties"])
    hints = typing.get_type_hints(cls)
    for key in schema["properties"]:
        # A field the contract may leave out or set null is Optional (or has a default) here.
        optional = key not in schema.get("required", []) or "null" in json.dumps(schema["properties"][key])
        field = fields[snake(key)]
        defaulted = field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
        hint = hints[snake(key)]
        assert not optional or defaulted or hint is typing.Any or type(None) in typing.get_args(hint), key


@pytest.mark.parametrize("call", sorted(OPERATIONS))
def test_each_example_answer_reads_into_its_class(call):
    op = OPERATIONS[call]
    read = ANSWERS[call](op["example"]["output"])
    one = read[0] if isinstance(read, list) else read
    assert isinstance(one, (TableInfo, LeaseInfo, EffectiveSetting))


def test_every_failure_of_the_contract_is_known_by_its_type():
    listed = {f["type"] for f in CONTRACT["failures"]}
    known = set(ERRORS) | set(OPERATION_FAILURE_TYPES)
    assert listed == known
    for failure in CONTRACT["failures"]:
        if failure["type"] in ERRORS:
            assert ERRORS[failure["type"]].TYPE == failure["type"]
