import { ActivityCancellationType, proxyActivities, proxyLocalActivities, workflowInfo } from '@temporalio/workflow';
import type { ContractActivities, ContractCallName } from '../domain/contract';
import { RETRY } from './catalog-calls';
import { applicationFailureOf } from './failures';

/**
 * The contract's calls (domain/contract.ts), one workflow type each, for a service in any language: `tablefate.v1.trash`
 * takes the SDK's TrashRequest and answers its TableInfo. Each is the SDK's call in its two halves: the plan (validate,
 * resolve the table, refuse at once) in a local activity, journaled; then, unless the plan answered already, the run it
 * planned, started or joined and waited for in an activity that heartbeats. A worker that dies meanwhile takes nothing
 * with it: the activity's next attempt executes the same plan under the same request id (this run's), which the server
 * answers with the run the first attempt started. The call fails as the SDK's does, with the error's type name
 * (ApplicationFailure `NameTaken`, `OnHold`...), not wrapped in the activity's failure. A cancel of the call (its run's,
 * or a Nexus caller's) cancels the operation as the SDK's `cancel` does, and the call ends cancelled once the operation
 * has taken back what it did.
 */

const planning = proxyLocalActivities<Pick<ContractActivities, 'planContractCall'>>({
  startToCloseTimeout: '30s',
  retry: RETRY,
});

const executing = proxyActivities<Pick<ContractActivities, 'executeContractCall'>>({
  // A cancel of the call takes the operation back first (contract/activities.ts): the run ends once it has.
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  // A write may wait for a lock or a drain: its own deadline is a day (contract/activities.ts); a worker lost meanwhile
  // is seen within the heartbeat timeout, and the next attempt joins the same run.
  startToCloseTimeout: '25 hours',
  // (A cancel reaches the activity with a heartbeat's answer: the SDK sends one at most every 0.8 of this.)
  heartbeatTimeout: '5s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
});

async function contractCall(name: ContractCallName, request: unknown): Promise<unknown> {
  try {
    const planned = await planning.planContractCall({ name, request });
    if ('done' in planned) return planned.done;
    return await executing.executeContractCall({ name, plan: planned.plan, requestId: workflowInfo().runId });
  } catch (err) {
    // The SDK's failure, as the SDK would throw it: its type name at the top of the run's failure.
    throw applicationFailureOf(err) ?? err;
  }
}

const call =
  (name: ContractCallName) =>
  (request: unknown): Promise<unknown> =>
    contractCall(name, request);

// (One export per call, under its workflow type: the names a caller in another language starts.)
const create = call('create');
const adopt = call('adopt');
const trash = call('trash');
const truncate = call('truncate');
const undelete = call('undelete');
const purge = call('purge');
const rename = call('rename');
const hold = call('hold');
const release = call('release');
const setRetention = call('setRetention');
const acquireLease = call('acquireLease');
const renewLease = call('renewLease');
const releaseLease = call('releaseLease');
const setSetting = call('setSetting');
const unsetSetting = call('unsetSetting');
const describe = call('describe');
const list = call('list');
const listLeases = call('listLeases');
const getSettings = call('getSettings');

export {
  create as 'tablefate.v1.create',
  adopt as 'tablefate.v1.adopt',
  trash as 'tablefate.v1.trash',
  truncate as 'tablefate.v1.truncate',
  undelete as 'tablefate.v1.undelete',
  purge as 'tablefate.v1.purge',
  rename as 'tablefate.v1.rename',
  hold as 'tablefate.v1.hold',
  release as 'tablefate.v1.release',
  setRetention as 'tablefate.v1.setRetention',
  acquireLease as 'tablefate.v1.acquireLease',
  renewLease as 'tablefate.v1.renewLease',
  releaseLease as 'tablefate.v1.releaseLease',
  setSetting as 'tablefate.v1.setSetting',
  unsetSetting as 'tablefate.v1.unsetSetting',
  describe as 'tablefate.v1.describe',
  list as 'tablefate.v1.list',
  listLeases as 'tablefate.v1.listLeases',
  getSettings as 'tablefate.v1.getSettings',
};
