import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { TEMPORAL_SERVER_VERSION, TEMPORAL_UI_SERVER } from '../../servers/go-tools';

/**
 * docker-compose.yml runs for users what `npm run test:cluster` tests (`tablefate cluster up`, servers/cluster*.ts): the
 * same server release, the same configuration file read the same way by every service, the same schema script.
 * Nothing here runs Docker; this keeps the file from drifting away from what was tested.
 */

const ROOT = path.resolve(__dirname, '../..');
interface Service {
  image?: string;
  entrypoint?: string[];
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  deploy?: { replicas?: number };
}
const compose = parse(fs.readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
};
const template = fs.readFileSync(path.join(ROOT, 'deploy', 'temporal', 'cluster.yaml'), 'utf8');
const readByTemplate = new Set([...template.matchAll(/env "([A-Z_]+)"/g)].map((m) => m[1]!));
const serverServices = ['temporal-frontend', 'temporal-history', 'temporal-matching', 'temporal-worker'];
/** The code of `cluster up` (servers/cluster.ts and the files of its parts, servers/cluster-*.ts), as one text. */
const clusterSources = () =>
  fs
    .readdirSync(path.join(ROOT, 'servers'))
    .filter((name) => /^cluster(-[a-z-]+)?\.ts$/.test(name))
    .map((name) => fs.readFileSync(path.join(ROOT, 'servers', name), 'utf8'))
    .join('\n');

test('the four Temporal services run the tested server release, each a service of its own, two history replicas', () => {
  const services = serverServices.map((name) => compose.services[name]!);
  for (const [i, service] of services.entries()) {
    expect(service.image).toBe(`temporalio/server:${TEMPORAL_SERVER_VERSION}`);
    expect(service.environment?.SERVICE).toBe(['frontend', 'history', 'matching', 'worker'][i]);
  }
  expect(compose.services['temporal-history']!.deploy?.replicas).toBe(2);
  expect(compose.services['temporal-ui']!.image).toBe(`temporalio/ui:${TEMPORAL_UI_SERVER.version}`);
  // admin-tools is tagged by the server's minor release.
  const minor = TEMPORAL_SERVER_VERSION.split('.').slice(0, 2).join('.');
  for (const name of ['temporal-schema', 'temporal-namespace'])
    expect(compose.services[name]!.image).toBe(`temporalio/admin-tools:${minor}`);
});

test('every Temporal service reads deploy/temporal/cluster.yaml as `cluster up` does, with only variables the template reads', () => {
  for (const name of serverServices) {
    const service = compose.services[name]!;
    expect(service.volumes).toContain('./deploy/temporal:/etc/tablefate/temporal:ro');
    const script = service.entrypoint!.join(' ');
    expect(script).toMatch(
      /temporal-server --root \/etc\/tablefate\/temporal --config \. --env cluster --allow-no-auth start --service "\$\$SERVICE"/,
    );
    expect(script).toMatch(/TEMPORAL_BROADCAST_ADDRESS=/);
    for (const variable of Object.keys(service.environment ?? {}).filter((v) => v !== 'SERVICE')) {
      expect([variable, readByTemplate.has(variable)]).toEqual([variable, true]);
    }
    expect(service.environment?.TEMPORAL_DYNAMIC_CONFIG_FILE).toBe('/etc/tablefate/temporal/dynamicconfig.yaml');
  }
  // The variables servers/cluster*.ts set are the template's too.
  const clusterCode = clusterSources();
  const setByCluster = [...clusterCode.matchAll(/\b(TEMPORAL_[A-Z_]+):/g)]
    .map((m) => m[1]!)
    .filter((v) => v.startsWith('TEMPORAL_') && !v.endsWith('_PATH'));
  const outsideTemplate = setByCluster.filter((v) => !readByTemplate.has(v) && !['TEMPORAL_SQL_TOOL', 'TEMPORAL_SCHEMA_DIR'].includes(v));
  expect(outsideTemplate).toEqual([]);
});

test('the schema step is the same script cluster up runs, and the tablefate parts reach the frontend', () => {
  expect(compose.services['temporal-schema']!.command).toEqual(['/deploy/setup-schema.sh']);
  expect(compose.services['temporal-schema']!.volumes).toContain('./deploy/temporal:/deploy:ro');
  const clusterCode = clusterSources();
  expect(clusterCode).toMatch(/SETUP_SCHEMA_SCRIPT = path\.join\(CLUSTER_CONFIG_DIR, 'setup-schema\.sh'\)/);
  for (const name of ['worker', 'temporal-namespace', 'temporal-ui']) {
    expect([name, compose.services[name]!.environment?.TEMPORAL_ADDRESS]).toEqual([name, 'temporal-frontend:7233']);
  }
});
