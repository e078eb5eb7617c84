import { acquireLeaseCall, listLeases, releaseLeaseCall, renewLeaseCall } from './leases';
import { holdCall, releaseCall } from './holds';
import { getSettings, setSettingCall, unsetSettingCall } from './settings';
import { adoptCall, createCall, describe, list, renameCall } from './tables';
import { purgeCall, retentionCall, trashCall } from './trash';
import { undeleteCall } from './recall';
import { truncateCall } from './truncate';
import { readCall } from './calls';

/**
 * The SDK's calls that a service may make, by the name the contract gives each (contract/): the writes in their two
 * halves, the reads whole. TableFateClient runs each through `perform`; a contract call runs the same record.
 */
export const CALLS = {
  create: createCall,
  adopt: adoptCall,
  trash: trashCall,
  truncate: truncateCall,
  undelete: undeleteCall,
  purge: purgeCall,
  rename: renameCall,
  hold: holdCall,
  release: releaseCall,
  setRetention: retentionCall,
  acquireLease: acquireLeaseCall,
  renewLease: renewLeaseCall,
  releaseLease: releaseLeaseCall,
  setSetting: setSettingCall,
  unsetSetting: unsetSettingCall,
  describe: readCall(describe),
  list: readCall(list),
  listLeases: readCall(listLeases),
  getSettings: readCall(getSettings),
} as const;

export type CallName = keyof typeof CALLS;
