import type { CommandRecord } from './command';

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when the command runs (cli/command.ts) */
const contractDocument = () => require('../contract/document') as typeof import('../contract/document');
const contractText = () => require('./contract-text') as typeof import('./contract-text');
const clientConfig = () => require('../config/client') as typeof import('../config/client');
const deployment = () => require('../domain/deployment') as typeof import('../domain/deployment');
/* eslint-enable @typescript-eslint/no-require-imports */

/**
 * `tablefate contract`: the calls a service in any language makes (docs/contract/README.md), for the deployment this
 * environment names. Made from the code, as docs/contract/contract.json is; it reads the environment and nothing else,
 * so that it answers without a server or a catalog.
 */
export const contract: CommandRecord = {
  name: 'contract',
  usage: '  contract [--json]                           the calls services in any language make: workflow types, JSON Schemas, failures',
  spec: {
    options: {},
    args: { min: 0, max: 0 },
    run: ({ io, env, json }) => {
      const make = contractDocument().contractDocument;
      const doc = make({ namespace: clientConfig().loadClientConfig(env).temporalNamespace, taskQueue: deployment().TASK_QUEUE });
      io.out(json ? JSON.stringify(doc, null, 2) : contractText().renderContractMarkdown(doc));
      return Promise.resolve();
    },
  },
};
