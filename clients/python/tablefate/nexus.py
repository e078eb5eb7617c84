"""tablefate's calls from a Python workflow, through a Nexus endpoint: durable, whatever restarts meanwhile.

Use inside a workflow only (``workflow.create_nexus_client``)::

    tables = TablefateNexus(endpoint="tablefate")
    info = await tables.trash("shop.orders", retention_seconds=3600)

A write is an asynchronous operation: the workflow waits for the call's run, across a restart of the worker of either
side. A call that fails raises the TablefateError of its type, which fails the workflow with that type unless caught.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Optional

from temporalio import workflow

from .calls import DEFAULT_ENDPOINT, NEXUS_SERVICE, Calls


class TablefateNexus(Calls):
    def __init__(self, *, endpoint: str = DEFAULT_ENDPOINT, timeout: timedelta = timedelta(hours=1)):
        self._client = workflow.create_nexus_client(service=NEXUS_SERVICE, endpoint=endpoint)
        self._timeout = timeout

    async def _send(self, name: str, req: dict[str, Any], request_id: Optional[str]) -> Any:
        if request_id is not None:
            # The operation is the workflow's, made once whatever restarts: the server gives it its request id.
            raise TypeError("a call through Nexus takes no request_id: the workflow's own history makes it once")
        return await self._client.execute_operation(name, req, schedule_to_close_timeout=self._timeout)
