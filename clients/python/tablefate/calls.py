"""The contract's calls (docs/contract/contract.json): each one's name, how its answer reads, and its workflow type."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from .errors import from_failure
from .types import EffectiveSetting, LeaseInfo, TableInfo, request

#: The contract's version: its calls are the workflow types ``tablefate.v1.<call>``, the Nexus service ``tablefate``.
CONTRACT_VERSION = 1
NEXUS_SERVICE = "tablefate"
#: The task queue and Nexus endpoint a deployment uses unless it says otherwise (``tablefate dev`` makes the endpoint).
DEFAULT_TASK_QUEUE = "tablefate"
DEFAULT_ENDPOINT = "tablefate"


def _many(read: Callable[[dict[str, Any]], Any]) -> Callable[[Any], Any]:
    return lambda data: [read(item) for item in data]


#: Each call by its contract name, with how its JSON answer is read.
ANSWERS: dict[str, Callable[[Any], Any]] = {
    "create": TableInfo.from_json,
    "adopt": TableInfo.from_json,
    "trash": TableInfo.from_json,
    "truncate": TableInfo.from_json,
    "undelete": TableInfo.from_json,
    "purge": TableInfo.from_json,
    "rename": TableInfo.from_json,
    "hold": TableInfo.from_json,
    "release": TableInfo.from_json,
    "setRetention": TableInfo.from_json,
    "acquireLease": LeaseInfo.from_json,
    "renewLease": LeaseInfo.from_json,
    "releaseLease": LeaseInfo.from_json,
    "setSetting": EffectiveSetting.from_json,
    "unsetSetting": EffectiveSetting.from_json,
    "describe": TableInfo.from_json,
    "list": _many(TableInfo.from_json),
    "listLeases": _many(LeaseInfo.from_json),
    "getSettings": _many(EffectiveSetting.from_json),
}


def workflow_type(call: str) -> str:
    """The workflow type a call is started as: ``tablefate.v1.create``."""
    return f"tablefate.v{CONTRACT_VERSION}.{call}"


TableRef = Union[str, int]
"""A table by name (``ns.name``, or ``name`` in namespace ``default``) or by id."""


class Calls:
    """The contract's calls, typed: each builds its request and reads its answer; a subclass's ``_send`` makes it."""

    async def call(self, name: str, req: dict[str, Any], *, request_id: Optional[str] = None) -> Any:
        """Any call of the contract by its name, with its request as the contract's JSON; its answer read, or its
        failure raised as the TablefateError of its type."""
        read = ANSWERS[name]
        try:
            answer = await self._send(name, req, request_id)
        except Exception as err:
            typed = from_failure(err)
            if typed is None:
                raise
            raise typed from err
        return read(answer)

    async def _send(self, name: str, req: dict[str, Any], request_id: Optional[str]) -> Any:
        raise NotImplementedError

    # The tables.

    async def create(self, table: str, *, shards: Optional[int] = None, columns: Optional[str] = None, like: Optional[str] = None,
                     request_id: Optional[str] = None) -> TableInfo:
        """Creates a table, or answers it if the same create happened already (its id and shards unchanged)."""
        return await self.call("create", request(table=table, shards=shards, columns=columns, like=like), request_id=request_id)

    async def adopt(self, table: str, *, node: Optional[str] = None, request_id: Optional[str] = None) -> TableInfo:
        """PostgreSQL: registers a table that exists already, so that drop, recall and purge protect it."""
        return await self.call("adopt", request(table=table, node=node), request_id=request_id)

    async def trash(self, table: Optional[str] = None, *, together: Optional[list[str]] = None, namespace: Optional[str] = None,
                    retention_seconds: Optional[int] = None, drain_timeout_seconds: Optional[int] = None,
                    node: Optional[str] = None, cascade: Optional[bool] = None, dry_run: bool = False,
                    request_id: Optional[str] = None) -> TableInfo:
        """Moves a live table to the trash; answers once it is TRASHED, while its expiry timer runs on.
        With `together`: more tables dropped with it as one, all or none (each then names the others in `dropped_with`);
        with `namespace` instead of a table: every table tablefate keeps in it, as one (PostgreSQL: with their views, and
        the schema with what else it holds). PostgreSQL, with `node`: a table tablefate does not keep yet is adopted and
        dropped in one operation; with `cascade`: its views go into the trash with it, and live tables' keys, policies and
        defaults on it are detached. With `dry_run`: drops nothing and takes no lock; answers the table as it is (READY),
        its `notes` saying what the drop would move into the trash with it and detach, or raises the drop's own refusal."""
        req = request(table=table, together=together, namespace=namespace, retention_seconds=retention_seconds,
                      drain_timeout_seconds=drain_timeout_seconds, node=node, cascade=cascade, dry_run=dry_run or None)
        return await self.call("trash", req, request_id=request_id)

    async def truncate(self, table: TableRef, *, retention_seconds: Optional[int] = None,
                       drain_timeout_seconds: Optional[int] = None, cascade: Optional[bool] = None,
                       request_id: Optional[str] = None) -> TableInfo:
        """Empties a READY table into the trash: its rows become a trash entry of their own (a new id under the table's
        name, `truncated_from` naming the table), which this answers; the table stays live under its id, empty. With
        `cascade` (PostgreSQL, as TRUNCATE ... CASCADE): the tables whose foreign keys reference it, and theirs in turn,
        are truncated with it, each into an entry of its own."""
        req = request(table=table, retention_seconds=retention_seconds, drain_timeout_seconds=drain_timeout_seconds,
                      cascade=cascade)
        return await self.call("truncate", req, request_id=request_id)

    async def undelete(self, table: TableRef, *, new_name: Optional[str] = None, new_namespace: Optional[str] = None,
                       alone: bool = False, in_place: bool = False, request_id: Optional[str] = None) -> TableInfo:
        """Recalls a trashed table (by id, or by name the most recently trashed), maybe under a new name, or into
        `new_namespace`. One dropped with others as one comes back with those still in the trash, unless `alone`.
        `in_place`: a truncate's entry back under its table's name, that table (with the rows written since) into the
        trash as a drop puts it."""
        req = request(table=table, new_name=new_name, new_namespace=new_namespace, alone=alone or None,
                      in_place=in_place or None)
        return await self.call("undelete", req, request_id=request_id)

    async def purge(self, table_id: int, *, request_id: Optional[str] = None) -> TableInfo:
        """Deletes a trashed table for good now; its tombstone stays (state PURGED)."""
        return await self.call("purge", request(table_id=table_id), request_id=request_id)

    async def rename(self, table: TableRef, new_name: str, *, drain_timeout_seconds: Optional[int] = None,
                     request_id: Optional[str] = None) -> TableInfo:
        """A READY table under a new name (PostgreSQL: the table itself, once the sessions using it let go)."""
        req = request(table=table, new_name=new_name, drain_timeout_seconds=drain_timeout_seconds)
        return await self.call("rename", req, request_id=request_id)

    async def hold(self, table: TableRef, *, reason: Optional[str] = None, request_id: Optional[str] = None) -> TableInfo:
        """A legal hold: nothing purges the table (expiry, space cap, purge) until it is released."""
        return await self.call("hold", request(table=table, reason=reason), request_id=request_id)

    async def release(self, table: TableRef, *, request_id: Optional[str] = None) -> TableInfo:
        return await self.call("release", request(table=table), request_id=request_id)

    async def set_retention(self, table: TableRef, retention_seconds: int, *, request_id: Optional[str] = None) -> TableInfo:
        return await self.call("setRetention", request(table=table, retention_seconds=retention_seconds), request_id=request_id)

    async def describe(self, table: TableRef, *, with_sizes: bool = False) -> TableInfo:
        return await self.call("describe", request(table=table, with_sizes=with_sizes or None))

    async def list(self, *, include_trashed: bool = False, after: Optional[int] = None, limit: Optional[int] = None,
                   with_sizes: bool = False) -> list[TableInfo]:
        req = request(include_trashed=include_trashed or None, after=after, limit=limit, with_sizes=with_sizes or None)
        return await self.call("list", req)

    # Leases.

    async def acquire_lease(self, table: TableRef, *, ttl_seconds: Optional[int] = None, holder: Optional[str] = None,
                            request_id: Optional[str] = None) -> LeaseInfo:
        return await self.call("acquireLease", request(table=table, ttl_seconds=ttl_seconds, holder=holder), request_id=request_id)

    async def renew_lease(self, lease_id: str, *, ttl_seconds: Optional[int] = None, request_id: Optional[str] = None) -> LeaseInfo:
        return await self.call("renewLease", request(lease_id=lease_id, ttl_seconds=ttl_seconds), request_id=request_id)

    async def release_lease(self, lease_id: str, *, request_id: Optional[str] = None) -> LeaseInfo:
        return await self.call("releaseLease", request(lease_id=lease_id), request_id=request_id)

    async def list_leases(self, *, table: Optional[TableRef] = None) -> list[LeaseInfo]:
        return await self.call("listLeases", request(table=table))

    # Settings.

    async def get_settings(self, *, key: Optional[str] = None, namespace: Optional[str] = None) -> list[EffectiveSetting]:
        return await self.call("getSettings", request(key=key, namespace=namespace))

    async def set_setting(self, key: str, value: str, *, namespace: Optional[str] = None, request_id: Optional[str] = None) -> EffectiveSetting:
        return await self.call("setSetting", request(key=key, value=value, namespace=namespace), request_id=request_id)

    async def unset_setting(self, key: str, *, namespace: Optional[str] = None, request_id: Optional[str] = None) -> EffectiveSetting:
        return await self.call("unsetSetting", request(key=key, namespace=namespace), request_id=request_id)
