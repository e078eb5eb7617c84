import { clusterSetup } from './global-setup';

/** jest.cluster.config.js's global setup: the shared servers, with a Temporal cluster (see global-setup.ts). */
export default clusterSetup;
