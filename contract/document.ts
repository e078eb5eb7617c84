import { z } from 'zod';
import {
  CONTRACT_CALLS,
  CONTRACT_VERSION,
  CONTRACT_WRITES,
  NEXUS_SERVICE,
  contractWorkflowType,
  type ContractCallName,
} from '../domain/contract';
import { searchAttributesFor, type OperationTarget } from '../domain/operations';
import { CALL_TERMS, type CallTerms } from './calls';
import {
  FAILURE_TYPES,
  RETRIED,
  RUN_FAILURES,
  detailsOf,
  isRetried,
  meaningOf,
  type ContractFailureType,
  type DetailField,
} from './failures';

/**
 * The contract a service in any language calls tablefate by (issue 32): each call's workflow type, its input and output
 * as JSON Schema, the search attributes of the run it starts, and the failures it can end with, made from the code that
 * runs it (domain/contract.ts, workflows/contract.ts, the SDK's requests and answers: contract/calls.ts, and the errors'
 * meanings: contract/failures.ts). `tablefate contract` prints it (cli/contract-text.ts); docs/contract/contract.json is
 * its published copy (cli/contract-publish.ts), which a test keeps equal to it.
 */

const WORKFLOW_ID_RULE =
  'any id of yours, unique per request, kept for its retries; start with workflowIdConflictPolicy USE_EXISTING and ' +
  'workflowIdReusePolicy REJECT_DUPLICATE: the same id again joins its run while it is open, and once it has closed is ' +
  "refused as already started, when you read that run's result by the id (one operation, one answer)";

export type JsonSchema = z.core.JSONSchema.JSONSchema;

export interface ContractFailure {
  type: ContractFailureType;
  /**
   * The call's activity tries again (RETRIED_FAILURE_TYPES): the call does not end with it, a caller sees it only as the
   * pending activity's last failure.
   */
  retryable: boolean;
  meaning: string;
}

export interface ContractSearchAttribute {
  name: string;
  /** Temporal's search attribute type: KEYWORD, INT. */
  type: string;
  /** Its value, when it is the same for every run of the call (TableOp); the others are the table's. */
  value?: string;
}

export interface ContractOperation {
  name: ContractCallName;
  kind: 'write' | 'read';
  does: string;
  workflowType: string;
  workflowId: string;
  taskQueue: string;
  nexus: { service: string; operation: ContractCallName };
  input: JsonSchema;
  output: JsonSchema;
  example: { workflowId: string; input: unknown; output: unknown };
  /** The search attributes of the operation's run the call starts: none for a read, a setting, or a new retention. */
  searchAttributes: ContractSearchAttribute[];
  failures: ContractFailure[];
}

export interface ContractDocument {
  version: number;
  service: string;
  namespace: string;
  taskQueue: string;
  workflowIdRule: string;
  operations: ContractOperation[];
  failures: Array<ContractFailure & { details: Partial<Record<DetailField, string>> }>;
}

/** The contract as the deployment at `namespace` and `taskQueue` offers it. */
export function contractDocument(opts: { namespace: string; taskQueue: string }): ContractDocument {
  const operations = CONTRACT_CALLS.map((name) => operationOf(name, opts.taskQueue));
  const named = new Set(operations.flatMap((op) => op.failures.map((f) => f.type)));
  return {
    version: CONTRACT_VERSION,
    service: NEXUS_SERVICE,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    workflowIdRule: WORKFLOW_ID_RULE,
    operations,
    failures: FAILURE_TYPES.filter((type) => named.has(type)).map((type) => ({
      ...failureOf(type),
      details: detailsOf(type),
    })),
  };
}

function operationOf(name: ContractCallName, taskQueue: string): ContractOperation {
  const terms: CallTerms<ContractCallName> = CALL_TERMS[name];
  const isWrite = (CONTRACT_WRITES as readonly string[]).includes(name);
  const own = terms.failures;
  const types = new Set<ContractFailureType>([
    'InvalidInput',
    ...(Object.keys(own) as ContractFailureType[]),
    ...(terms.run ? [...RUN_FAILURES[terms.run], ...RETRIED] : []),
  ]);
  return {
    name,
    kind: isWrite ? 'write' : 'read',
    does: terms.does,
    workflowType: contractWorkflowType(name),
    workflowId: WORKFLOW_ID_RULE,
    taskQueue,
    nexus: { service: NEXUS_SERVICE, operation: name },
    input: z.toJSONSchema(terms.request, { io: 'input' }),
    output: z.toJSONSchema(terms.answer, { io: 'output', override: openObjects }),
    example: { workflowId: `shop-api-${name}-7d9f1c2a`, ...terms.example },
    searchAttributes: terms.starts ? searchAttributesOf(terms.starts) : [],
    failures: FAILURE_TYPES.filter((type) => types.has(type)).map((type) => ({
      ...failureOf(type),
      meaning: own[type] ?? meaningOf(type),
    })),
  };
}

function failureOf(type: ContractFailureType): ContractFailure {
  return { type, retryable: isRetried(type), meaning: meaningOf(type) };
}

/**
 * An answer may gain fields (an additive change, not a breaking one: see docs/contract/README.md), so its schema does
 * not refuse the ones it does not name. (A request's does: the SDK refuses a field it does not know.)
 */
function openObjects({ jsonSchema }: { jsonSchema: JsonSchema }): void {
  if (jsonSchema.type === 'object') delete jsonSchema.additionalProperties;
}

/**
 * The search attributes of the run a call starts, as the operation's record makes them. An attribute whose value is the
 * same for two different tables is the operation's own (TableOp), and is given; the others are the table's.
 */
function searchAttributesOf({ op, knows }: NonNullable<CallTerms<ContractCallName>['starts']>): ContractSearchAttribute[] {
  const known = (table: Required<OperationTarget>): OperationTarget => Object.fromEntries(knows.map((key) => [key, table[key]]));
  const one = searchAttributesFor(op, known({ tableId: 1, namespace: 'a', name: 'a' }));
  const other = searchAttributesFor(op, known({ tableId: 2, namespace: 'b', name: 'b' }));
  return one.map(({ key, value }, i) => ({
    name: key.name,
    type: key.type,
    ...(value === other[i]!.value ? { value: String(value) } : {}),
  }));
}
