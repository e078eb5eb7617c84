"""The failures a call of tablefate ends with, by the type name the contract gives each (docs/contract/contract.json).

Each is a Temporal ``ApplicationError`` whose ``type`` is tablefate's: raised by :class:`tablefate.TablefateClient` for a
call that failed, and fit to be raised as they are from a workflow (it then fails with the same type name).
"""

from __future__ import annotations

from typing import Any, Optional

from temporalio.exceptions import ApplicationError


class TablefateError(ApplicationError):
    """A call of tablefate that failed: ``type`` names why (``NameTaken``, ``OnHold``...), ``fields`` what it carries."""

    TYPE = "OperationFailed"

    def __init__(self, message: str, fields: Optional[dict[str, Any]] = None, *, type: Optional[str] = None, non_retryable: bool = True):
        super().__init__(message, *([fields] if fields else []), type=type or self.TYPE, non_retryable=non_retryable)
        self.fields: dict[str, Any] = dict(fields or {})


def _error_class(type_name: str, doc: str) -> type[TablefateError]:
    return type(f"{type_name}Error", (TablefateError,), {"TYPE": type_name, "__doc__": doc})


# The refusals: the request was refused, and nothing changed.
InvalidInputError = _error_class("InvalidInput", "The request is malformed: nothing was started and nothing changed.")
TableNotFoundError = _error_class("TableNotFound", "No such table (a name: no live table bears it).")
TableInTrashError = _error_class("TableInTrash", "The table exists but is in the trash: it can be recalled, not used.")
TableExistsError = _error_class("TableExists", "A table of that name exists (made otherwise than asked).")
NameTakenError = _error_class("NameTaken", "The name belongs to another table: recall under a new name.")
WrongStateError = _error_class("WrongState", "The table is not in a state that allows the call.")
HasDependentsError = _error_class("HasDependents", "PostgreSQL: objects outside the table depend on it.")
TableBusyError = _error_class("TableBusy", "Leases or sessions held the table past the drop's drain deadline; taken back.")
OnHoldError = _error_class("OnHold", "The table is under a legal hold: nothing purges it until it is released.")
LeaseNotFoundError = _error_class("LeaseNotFound", "No such lease: never taken, released, or expired.")
ShardMissingError = _error_class("ShardMissing", "PostgreSQL: a shard table is not where tablefate put it.")
# The operation ran and failed otherwise.
OperationFailedError = TablefateError
# What another attempt may cure.
ServerUnreachableError = _error_class("ServerUnreachable", "The worker lost the Temporal server for a moment.")
OperationTimeoutError = _error_class("OperationTimeout", "The call's wait ran out; the operation goes on.")
NoWorkerError = _error_class("NoWorker", "No tablefate worker polls the task queue.")

#: The classes by tablefate's type name; a type not listed (an operation's failure: LockLost, StorageFault...) is
#: a TablefateError with that type.
ERRORS: dict[str, type[TablefateError]] = {
    cls.TYPE: cls
    for cls in (
        InvalidInputError,
        TableNotFoundError,
        TableInTrashError,
        TableExistsError,
        NameTakenError,
        WrongStateError,
        HasDependentsError,
        TableBusyError,
        OnHoldError,
        LeaseNotFoundError,
        ShardMissingError,
        ServerUnreachableError,
        OperationTimeoutError,
        NoWorkerError,
    )
}


def from_failure(err: BaseException) -> Optional[TablefateError]:
    """The TablefateError a Temporal failure carries (a call's run, a Nexus operation's, any depth down), if any."""
    seen: Optional[BaseException] = err
    while seen is not None:
        if isinstance(seen, TablefateError):
            return seen
        if isinstance(seen, ApplicationError) and seen.type and _is_ours(seen.type):
            fields = seen.details[0] if seen.details and isinstance(seen.details[0], dict) else None
            cls = ERRORS.get(seen.type, TablefateError)
            return cls(seen.message, fields, type=seen.type, non_retryable=seen.non_retryable)
        seen = seen.__cause__ if seen.__cause__ is not None else getattr(seen, "cause", None)
    return None


#: The operation failures (docs/contract): an operation that ran and failed otherwise than by a refusal.
OPERATION_FAILURE_TYPES = (
    "LockLost",
    "StorageFault",
    "WrongCatalog",
    "WorkflowTerminated",
    "WorkflowCancelled",
    "WorkflowTimedOut",
    "OperationFailed",
)


def _is_ours(type_name: str) -> bool:
    return type_name in ERRORS or type_name in OPERATION_FAILURE_TYPES
