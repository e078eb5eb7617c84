"""The contract's calls from a Python service (TablefateClient), against a real server and a real tablefate worker."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tablefate import NameTakenError, OnHoldError, TableInfo, TablefateClient, TablefateError


def unique(prefix: str) -> str:
    return f"py.{prefix}_{uuid.uuid4().hex[:8]}"


async def test_create_trash_undelete_purge_answer_typed_tables(client):
    tables = TablefateClient(client)
    name = unique("orders")
    created = await tables.create(name, shards=3)
    assert isinstance(created, TableInfo)
    assert (created.qualified_name, created.state, created.shards, len(created.placement)) == (name, "READY", 3, 3)

    # The trash answers once the table is TRASHED: its expiry is the retention after its drop.
    trashed = await tables.trash(name, retention_seconds=3600)
    assert (trashed.id, trashed.state) == (created.id, "TRASHED")
    assert trashed.dropped_at is not None and trashed.expire_at is not None
    # Who dropped it: the contract call, by its workflow type (and the caller's workflow id).
    assert trashed.dropped_by is not None and trashed.dropped_by.startswith("tablefate.v1.trash ")
    assert (await tables.describe(created.id)).state == "TRASHED"

    recalled = await tables.undelete(created.id)
    assert (recalled.id, recalled.state, recalled.dropped_at, recalled.dropped_by) == (created.id, "READY", None, None)

    await tables.trash(name)
    purged = await tables.purge(created.id)
    assert (purged.id, purged.state) == (created.id, "PURGED")
    assert purged.purged_at is not None


async def test_several_tables_as_one_and_a_whole_namespace(client):
    tables = TablefateClient(client)
    first, second = unique("pair_a"), unique("pair_b")
    a = await tables.create(first, shards=1)
    b = await tables.create(second, shards=2)
    trashed = await tables.trash(first, together=[second], retention_seconds=3600)
    assert (trashed.id, trashed.state, trashed.dropped_with) == (a.id, "TRASHED", [b.id])
    assert (await tables.describe(b.id)).dropped_with == [a.id]
    alone = await tables.undelete(b.id, alone=True)
    assert (alone.state, alone.dropped_with) == ("READY", [])
    assert (await tables.describe(a.id)).state == "TRASHED"
    await tables.undelete(a.id)

    namespace = f"pyns_{uuid.uuid4().hex[:8]}"
    kept = [await tables.create(f"{namespace}.{name}", shards=1) for name in ("x", "y")]
    whole = await tables.trash(namespace=namespace, retention_seconds=3600)
    assert (whole.id, whole.dropped_with) == (kept[0].id, [kept[1].id])
    moved = await tables.undelete(kept[1].id, new_namespace=f"{namespace}_old")
    assert (moved.namespace, moved.name, moved.state) == (f"{namespace}_old", "y", "READY")
    assert (await tables.describe(kept[0].id)).namespace == f"{namespace}_old"


async def test_a_refusal_is_its_typed_error_and_changes_nothing(client):
    tables = TablefateClient(client)
    name = unique("taken")
    first = await tables.create(name, shards=1)
    await tables.trash(name)
    second = await tables.create(name, shards=1)
    with pytest.raises(NameTakenError) as taken:
        await tables.undelete(first.id)
    assert taken.value.type == "NameTaken" and taken.value.non_retryable
    assert name in taken.value.message
    assert (await tables.describe(first.id)).state == "TRASHED"
    assert (await tables.describe(second.id)).state == "READY"

    await tables.hold(first.id, reason="audit 2026")
    with pytest.raises(OnHoldError) as held:
        await tables.purge(first.id)
    assert "audit 2026" in held.value.message
    assert (await tables.describe(first.id)).hold.reason == "audit 2026"

    # Any refusal is a TablefateError with its type, whatever its class.
    with pytest.raises(TablefateError) as invalid:
        await tables.create("Not A Name")
    assert invalid.value.type == "InvalidInput"


async def test_a_create_retried_after_it_failed_lands_on_the_same_table(client, worker):
    tables = TablefateClient(client)
    name = unique("retried")
    request_id = str(uuid.uuid4())
    # No worker: the call fails (it gives up waiting); its run waits for a worker on the server.
    worker.kill()
    try:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(tables.create(name, shards=2, request_id=request_id), timeout=2)
    finally:
        worker.start()
    # The same request again joins that run; a new request for the same table gets the same table.
    again = await tables.create(name, shards=2, request_id=request_id)
    anew = await tables.create(name, shards=2)
    assert (again.id, again.shards, again.state) == (anew.id, 2, "READY")
    assert again.placement == anew.placement
    listed = [t for t in await tables.list() if t.qualified_name == name]
    assert [t.id for t in listed] == [again.id]


async def test_the_same_request_again_after_its_answer_gets_that_answer_not_a_second_operation(client):
    tables = TablefateClient(client)
    name = unique("twice")
    await tables.create(name, shards=1)
    request_id = str(uuid.uuid4())
    first = await tables.trash(name, retention_seconds=600, request_id=request_id)
    # A second trash would be refused (the table is in the trash): the same request reads the first one's answer.
    again = await tables.trash(name, retention_seconds=600, request_id=request_id)
    assert again == first
    with pytest.raises(TablefateError) as second:
        await tables.trash(name, retention_seconds=600)
    assert second.value.type in ("TableInTrash", "TableNotFound")
