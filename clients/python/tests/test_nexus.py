"""The contract's calls from a Python workflow through the Nexus endpoint `tablefate`, with a real tablefate worker."""

from __future__ import annotations

import asyncio
import uuid

from temporalio.worker import Worker

from tablefate import TablefateClient

from callers import LifecycleCaller, TrashCaller

CALLERS = "python-callers"


def unique(prefix: str) -> str:
    return f"nx.{prefix}_{uuid.uuid4().hex[:8]}"


async def test_a_workflow_calls_the_lifecycle_through_nexus_and_reads_a_refusal_by_type(client):
    name = unique("life")
    async with Worker(client, task_queue=CALLERS, workflows=[LifecycleCaller, TrashCaller]):
        result = await client.execute_workflow(LifecycleCaller.run, name, id=f"caller-{uuid.uuid4()}", task_queue=CALLERS)
    assert result["states"] == ["READY", "TRASHED", "READY", "TRASHED", "PURGED"]
    assert result["expire_at"] is not None
    assert result["refused"] == "NameTaken"
    assert result["missing"] == "TableNotFound"
    tables = TablefateClient(client)
    assert (await tables.describe(result["id"])).state == "PURGED"
    assert (await tables.describe(name)).id == result["taker"]


async def test_a_nexus_call_survives_a_kill_of_the_tablefate_worker_and_gets_its_answer(client, worker):
    tables = TablefateClient(client)
    name = unique("leased")
    table = await tables.create(name, shards=2)
    # A lease holds the trash in its drain: the call is under way when the worker dies.
    lease = await tables.acquire_lease(name, ttl_seconds=600)
    async with Worker(client, task_queue=CALLERS, workflows=[LifecycleCaller, TrashCaller]):
        caller = await client.start_workflow(TrashCaller.run, args=[name, 120], id=f"caller-{uuid.uuid4()}", task_queue=CALLERS)
        await _until(lambda: _state(tables, table.id), "DRAINING")
        worker.kill()
        worker.start()
        await tables.release_lease(lease.id)
        result = await asyncio.wait_for(caller.result(), timeout=120)
    assert result == {"id": table.id, "state": "TRASHED"}
    assert (await tables.describe(table.id)).state == "TRASHED"


async def _state(tables: TablefateClient, table_id: int) -> str:
    return (await tables.describe(table_id)).state


async def _until(read, wanted: str, timeout: float = 30.0) -> None:
    async def loop() -> None:
        while await read() != wanted:
            await asyncio.sleep(0.1)

    await asyncio.wait_for(loop(), timeout)
