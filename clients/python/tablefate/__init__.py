"""Call tablefate from Python: ``TablefateClient`` from a service, ``TablefateNexus`` from a workflow (docs/contract)."""

from .calls import CONTRACT_VERSION, DEFAULT_ENDPOINT, DEFAULT_TASK_QUEUE, NEXUS_SERVICE, workflow_type
from .client import TablefateClient
from .errors import (
    ERRORS,
    HasDependentsError,
    InvalidInputError,
    LeaseNotFoundError,
    NameTakenError,
    NoWorkerError,
    OnHoldError,
    OperationFailedError,
    OperationTimeoutError,
    ServerUnreachableError,
    ShardMissingError,
    TableBusyError,
    TableExistsError,
    TableInTrashError,
    TableNotFoundError,
    TablefateError,
    WrongStateError,
)
from .nexus import TablefateNexus
from .types import EffectiveSetting, Hold, LeaseInfo, ShardPlacement, TableInfo, request

__all__ = [
    "CONTRACT_VERSION",
    "DEFAULT_ENDPOINT",
    "DEFAULT_TASK_QUEUE",
    "NEXUS_SERVICE",
    "workflow_type",
    "TablefateClient",
    "TablefateNexus",
    "TableInfo",
    "LeaseInfo",
    "EffectiveSetting",
    "Hold",
    "ShardPlacement",
    "request",
    "ERRORS",
    "TablefateError",
    "InvalidInputError",
    "TableNotFoundError",
    "TableInTrashError",
    "TableExistsError",
    "NameTakenError",
    "WrongStateError",
    "HasDependentsError",
    "TableBusyError",
    "OnHoldError",
    "LeaseNotFoundError",
    "ShardMissingError",
    "OperationFailedError",
    "ServerUnreachableError",
    "OperationTimeoutError",
    "NoWorkerError",
]
