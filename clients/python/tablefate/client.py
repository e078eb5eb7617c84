"""tablefate's calls from a Python service: each a workflow of the contract, started by its type name and waited for."""

from __future__ import annotations

import uuid
from typing import Any, Optional

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from .calls import DEFAULT_TASK_QUEUE, Calls, workflow_type


class TablefateClient(Calls):
    """tablefate's calls on a Temporal client (the deployment's namespace): each answers as tablefate's SDK does.

    Each call is a run of its own, ``tablefate.v1.<call>``, under the id ``tablefate-<call>-<request_id>``: the same
    ``request_id`` again (a retry after a timeout, a lost connection, a restart) joins the same run, or reads the answer
    of the one that has closed (while the namespace keeps it), never a second operation. Without one, each call draws its own. A call that fails raises the TablefateError of its
    type (tablefate.errors: ``NameTakenError``, ``OnHoldError``...).
    """

    def __init__(self, client: Client, *, task_queue: str = DEFAULT_TASK_QUEUE):
        self._client = client
        self._task_queue = task_queue

    async def _send(self, name: str, req: dict[str, Any], request_id: Optional[str]) -> Any:
        workflow_id = f"tablefate-{name}-{request_id or uuid.uuid4()}"
        try:
            # A run of this id going on is joined; one that has closed is not run again (its answer is read below).
            return await self._client.execute_workflow(
                workflow_type(name),
                req,
                id=workflow_id,
                task_queue=self._task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except WorkflowAlreadyStartedError:
            return await self._client.get_workflow_handle(workflow_id).result()
