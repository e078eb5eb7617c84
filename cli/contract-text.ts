import type { z } from 'zod';
import type { ContractDocument, JsonSchema } from '../contract/document';
import { renderRows } from './format';

/*
 * The contract (contract/document.ts) for a person: its tables in docs/contract/README.md (cli/contract-publish.ts writes
 * them), and `tablefate contract`'s text.
 */

/** A subschema as JSON Schema allows it (`true`: anything), as an object to read. */
const schemaOf = (schema: z.core.JSONSchema._JSONSchema): JsonSchema => (typeof schema === 'boolean' ? {} : schema);

/** A JSON Schema's fields, as a line of a table: `table, shards?, columns?`. */
function fieldsOf(schema: JsonSchema): string {
  const properties = Object.keys(schema.properties ?? {});
  const required = new Set(schema.required);
  return properties.length === 0 ? '(none)' : properties.map((field) => (required.has(field) ? field : `${field}?`)).join(', ');
}

/** What an answer is, by its schema's title: `TableInfo`, `TableInfo[]`. */
function answerOf(schema: JsonSchema): string {
  const { items } = schema;
  return items !== undefined && !Array.isArray(items) ? `${answerOf(schemaOf(items))}[]` : (schema.title ?? 'any');
}

/** The calls as a Markdown table (docs/contract/README.md has it, as cli/contract-publish.ts writes it). */
export function renderCallTable(doc: ContractDocument): string {
  const rows = doc.operations.map((op) => [`\`${op.name}\``, op.kind, op.does, fieldsOf(op.input), answerOf(op.output)]);
  return renderRows([['call', 'kind', 'what it does', 'input', 'output'], ...rows], 'markdown');
}

/** The failures as a Markdown table (docs/contract/README.md has it, as cli/contract-publish.ts writes it). */
export function renderFailureTable(doc: ContractDocument): string {
  const rows = doc.failures.map((f) => [`\`${f.type}\``, f.retryable ? 'yes' : 'no', f.meaning, Object.keys(f.details).join(', ') || '-']);
  return renderRows([['type', 'retried by the call', 'meaning', 'details[0] fields'], ...rows], 'markdown');
}

/** The contract for a person at a terminal (`tablefate contract`): every call, then every failure. */
export function renderContractMarkdown(doc: ContractDocument): string {
  const lines = [
    `# tablefate contract v${doc.version}`,
    '',
    `Temporal namespace ${doc.namespace}, task queue ${doc.taskQueue}; also Nexus service ${doc.service}, one operation per call.`,
    'Start a call as a workflow by its type name, with the request as its one JSON argument; its result is the answer.',
    `Workflow id: ${doc.workflowIdRule}.`,
    'A failure is an ApplicationFailure: its type is one of the failures below, its details[0] the fields they list.',
    "`tablefate contract --json` prints the same with each call's JSON Schemas and an example.",
  ];
  // A call's own reason for a failure is said where it differs from what the failure means in general.
  const general = new Map(doc.failures.map((f) => [f.type, f.meaning]));
  for (const op of doc.operations) {
    const properties = op.input.properties ?? {};
    const required = new Set(op.input.required);
    lines.push('', `## ${op.name} (${op.kind}): ${op.workflowType}`, '', op.does);
    lines.push('', 'input:');
    if (Object.keys(properties).length === 0) lines.push('  (none)');
    for (const [field, subschema] of Object.entries(properties)) {
      const schema = schemaOf(subschema);
      const given = required.has(field) ? 'required' : 'default' in schema ? `default ${JSON.stringify(schema.default)}` : 'optional';
      const oneOf = Array.isArray(schema.enum) ? ` (one of ${schema.enum.join(', ')})` : '';
      lines.push(`  ${field} (${given})${schema.description ? `: ${schema.description}` : ''}${oneOf}`);
    }
    lines.push(`output: ${answerOf(op.output)}`);
    if (op.searchAttributes.length > 0) {
      const attributes = op.searchAttributes.map((a) => (a.value === undefined ? a.name : `${a.name}=${a.value}`));
      lines.push(`its operation's run: search attributes ${attributes.join(', ')}`);
    }
    lines.push(`failures: ${op.failures.map((f) => f.type).join(', ')}`);
    for (const f of op.failures) if (f.meaning !== general.get(f.type)) lines.push(`  ${f.type}: ${f.meaning}`);
    lines.push(`example: ${JSON.stringify(op.example.input)}`);
  }
  lines.push('', '## failures', '');
  for (const f of doc.failures) {
    const details = Object.keys(f.details);
    lines.push(
      `${f.type}${f.retryable ? ' (retried by the call)' : ''}: ${f.meaning}${details.length ? ` [details: ${details.join(', ')}]` : ''}`,
    );
  }
  return lines.join('\n');
}
