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
from temporalio.exceptions import NexusOperationError

from .calls import ANSWERS, DEFAULT_ENDPOINT, NEXUS_SERVICE, Calls
from .errors import from_failure


class TablefateNexus(Calls):
    def __init__(self, *, endpoint: str = DEFAULT_ENDPOINT, timeout: timedelta = timedelta(hours=1)):
        self._client = workflow.create_nexus_client(service=NEXUS_SERVICE, endpoint=endpoint)
        self._timeout = timeout

    async def call(self, name: str, req: dict[str, Any], *, request_id: Optional[str] = None) -> Any:
        """The call `name` with its request as the contract's JSON (tablefate.types.request), its answer read."""
        if request_id is not None:
            # The operation is the workflow's, made once whatever restarts: the server gives it its request id.
            raise TypeError("a call through Nexus takes no request_id: the workflow's own history makes it once")
        read = ANSWERS[name]
        try:
            answer = await self._client.execute_operation(name, req, schedule_to_close_timeout=self._timeout)
        except NexusOperationError as err:
            typed = from_failure(err)
            if typed is None:
                raise
            raise typed from err
        return read(answer)
