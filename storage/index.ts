export type { SetListing, ShardArea, ShardRef, ShardReport, StorageDriver, StoredSet } from './driver';
export {
  classifyErrno,
  classifyStorageError,
  errnoOf,
  FatalStorageError,
  InvalidShardRefError,
  PermanentStorageError,
  QuarantinedNodeError,
  StorageInvariantError,
  StorageIoError,
} from './errors';
export type { QuarantineMarker, StorageFaultKind } from './errors';
export { FaultInjector } from './faults';
export type { Fault, StorageOp } from './faults';
export { LocalFileStorage } from './local-files';
export type { LocalFileStorageOptions } from './local-files';
export { assertNodesHoldAllShards, countShardFiles, existingNodes, NODE_NAME, nodeName, shardsBeyond } from './nodes';
export type { NodeHoldings } from './nodes';
export { clearQuarantine, listQuarantined, QUARANTINE_FILE, quarantineFile, readQuarantine, writeQuarantine } from './quarantine';
export { renameSet } from './rename-set';
export type { RenameOps, RenamePair } from './rename-set';
export { GARBAGE_SUFFIX, SHARD_EXTENSIONS, SHARD_FILE_NAME, shardFileNames, shardPaths } from './shard-files';
export type { StorageArea } from './shard-files';
