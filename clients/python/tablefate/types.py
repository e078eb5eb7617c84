"""The answers of tablefate's calls, as the contract gives them (docs/contract/contract.json), in Python's words.

The wire is the contract's JSON (camelCase keys); these classes read it (``from_json``), keeping to the fields they
know: a field a later contract adds is no break. ``tests/test_contract.py`` checks each against the contract's schema.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

#: A name part that needs no quotes, as psql writes it bare.
_PLAIN_PART = re.compile(r"^[a-z][a-z0-9_]*$")


def quote_part(part: str) -> str:
    """A name part as psql (and tablefate) writes it: bare when plain, else in double quotes, a quote inside doubled."""
    return part if _PLAIN_PART.match(part) else '"' + part.replace('"', '""') + '"'


@dataclass(frozen=True)
class ShardPlacement:
    shard: int
    node: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ShardPlacement":
        return cls(shard=data["shard"], node=data["node"])


@dataclass(frozen=True)
class Hold:
    """A legal hold: while it stands, nothing purges the table."""

    reason: Optional[str]
    since: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Hold":
        return cls(reason=data.get("reason"), since=data["since"])


@dataclass(frozen=True)
class TableInfo:
    """A table as the catalog has it: times are ISO-8601 strings (UTC), ``None`` where they do not apply."""

    id: int
    namespace: str
    name: str
    state: str
    shards: int
    placement: list[ShardPlacement]
    created_at: str
    dropped_at: Optional[str]
    expire_at: Optional[str]
    purged_at: Optional[str]
    hold: Optional[Hold]
    #: Who dropped it (the identity that started the drop); None unless it is (or was, if purged) in the trash, or
    #: when the drop did not say.
    dropped_by: Optional[str] = None
    #: With sizes asked for: the bytes its shards take on their nodes (None: a node did not answer).
    bytes: Optional[int] = None
    #: What its drop took along while it is in the trash (PostgreSQL, cascade), a sentence each.
    family: list[str] = field(default_factory=list)
    #: The ids of the other tables dropped with it as one, while it is in the trash.
    dropped_with: list[int] = field(default_factory=list)
    #: A trash entry a truncate made: the id of the table whose rows it holds.
    truncated_from: Optional[int] = None
    #: What an operation could not do as the table had it, a sentence each (PostgreSQL).
    notes: list[str] = field(default_factory=list)

    @property
    def qualified_name(self) -> str:
        """`<ns>.<name>` as tablefate reads it back: `shop.orders`, `shop."Orders"`."""
        return f"{quote_part(self.namespace)}.{quote_part(self.name)}"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TableInfo":
        return cls(
            id=data["id"],
            namespace=data["namespace"],
            name=data["name"],
            state=data["state"],
            shards=data["shards"],
            placement=[ShardPlacement.from_json(p) for p in data["placement"]],
            created_at=data["createdAt"],
            dropped_at=data.get("droppedAt"),
            expire_at=data.get("expireAt"),
            purged_at=data.get("purgedAt"),
            hold=Hold.from_json(data["hold"]) if data.get("hold") else None,
            dropped_by=data.get("droppedBy"),
            bytes=data.get("bytes"),
            family=list(data.get("family") or []),
            dropped_with=list(data.get("droppedWith") or []),
            truncated_from=data.get("truncatedFrom"),
            notes=list(data.get("notes") or []),
        )


@dataclass(frozen=True)
class LeaseInfo:
    """A lease on a READY table: a drop waits for it until it is released or expires."""

    id: str
    table_id: int
    holder: str
    ttl_seconds: int
    acquired_at: str
    expires_at: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "LeaseInfo":
        return cls(
            id=data["id"],
            table_id=data["tableId"],
            holder=data["holder"],
            ttl_seconds=data["ttlSeconds"],
            acquired_at=data["acquiredAt"],
            expires_at=data["expiresAt"],
        )


@dataclass(frozen=True)
class EffectiveSetting:
    """A runtime setting in force, and where its value comes from (``namespace``, ``global`` or ``default``)."""

    key: str
    value: Any
    source: str
    namespace: Optional[str]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "EffectiveSetting":
        return cls(key=data["key"], value=data["value"], source=data["source"], namespace=data.get("namespace"))


def request(**fields: Any) -> dict[str, Any]:
    """A call's request as the contract has it: the fields given, camelCase, the absent ones left out (not null)."""
    return {_camel(k): v for k, v in fields.items() if v is not None}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)
