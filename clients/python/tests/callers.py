"""Python workflows that call tablefate through the Nexus endpoint (imported by the test worker and its sandbox)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from tablefate import NameTakenError, TableNotFoundError, TablefateNexus


@workflow.defn
class LifecycleCaller:
    """Creates, trashes, recalls and purges a table through Nexus; a recall whose name is taken is read as NameTaken."""

    @workflow.run
    async def run(self, name: str) -> dict:
        tables = TablefateNexus()
        created = await tables.create(name, shards=2)
        trashed = await tables.trash(name, retention_seconds=3600)
        recalled = await tables.undelete(created.id)
        await tables.trash(name)
        taker = await tables.create(name, shards=1)
        try:
            await tables.undelete(created.id)
            refused = None
        except NameTakenError as err:
            refused = err.type
        described = await tables.describe(created.id)
        # A read answers in the handler: its refusal too, by its type.
        try:
            await tables.describe(2**52)
            missing = None
        except TableNotFoundError as err:
            missing = err.type
        purged = await tables.purge(created.id)
        return {
            "id": created.id,
            "states": [created.state, trashed.state, recalled.state, described.state, purged.state],
            "expire_at": trashed.expire_at,
            "taker": taker.id,
            "refused": refused,
            "missing": missing,
        }


@workflow.defn
class TrashCaller:
    """Trashes a table through Nexus, waiting for its drain as long as `drain_seconds`."""

    @workflow.run
    async def run(self, name: str, drain_seconds: int) -> dict:
        trashed = await TablefateNexus().trash(name, drain_timeout_seconds=drain_seconds)
        return {"id": trashed.id, "state": trashed.state}
