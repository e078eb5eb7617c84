import fs from 'node:fs';
import path from 'node:path';
import { exportedName, METRICS, type MetricSpec } from '../../domain/metrics';

/*
 * The operator's page (docs/operations.md) and the Grafana dashboard (deploy/grafana/tablefate-dashboard.json) against
 * domain/metrics.ts, where our metrics are said once: every metric documented, no name that the exporter does not
 * serve, a dashboard that parses and whose every panel queries something. Files only: no server.
 */

const ROOT = path.join(__dirname, '..', '..');
const DOC = fs.readFileSync(path.join(ROOT, 'docs', 'operations.md'), 'utf8');
const DASHBOARD_TEXT = fs.readFileSync(path.join(ROOT, 'deploy', 'grafana', 'tablefate-dashboard.json'), 'utf8');

const SPECS: MetricSpec[] = Object.values(METRICS);

/** Every series name Prometheus shows of our metrics: counters with `_total`, histograms with their three series. */
const SERIES = new Set(
  SPECS.flatMap((spec) => {
    const name = exportedName(spec);
    return spec.kind === 'histogram' ? [name, `${name}_bucket`, `${name}_count`, `${name}_sum`] : [name];
  }),
);

/** The `tablefate_*` names a text mentions (lower case: `TABLEFATE_METRICS_ADDRESS` is a variable, not a metric). */
function metricNamesIn(text: string): string[] {
  return [...new Set(text.match(/tablefate_[a-z_]+/g) ?? [])];
}

/** The fenced ```yaml blocks of the doc that hold alert rules. */
function alertRuleBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((block) => /^\s*- alert: /m.test(block));
}

interface Panel {
  type: string;
  title?: string;
  targets?: Array<{ expr?: string }>;
}

describe('the operations doc and the dashboard', () => {
  test('docs/operations.md names every metric of domain/metrics.ts by the name Prometheus shows', () => {
    const missing = SPECS.map(exportedName).filter((name) => !DOC.includes(`\`${name}\``));
    expect(missing).toEqual([]);
  });

  test('every tablefate_ name in docs/operations.md is one the exporter serves', () => {
    const unknown = metricNamesIn(DOC).filter((name) => !SERIES.has(name));
    expect(unknown).toEqual([]);
  });

  test('every tablefate_ name in the dashboard is one the exporter serves', () => {
    const unknown = metricNamesIn(DASHBOARD_TEXT).filter((name) => !SERIES.has(name));
    expect(unknown).toEqual([]);
  });

  test('the dashboard parses, and every panel has a target with a query', () => {
    const dashboard = JSON.parse(DASHBOARD_TEXT) as { panels: Panel[]; templating: { list: Array<{ name: string; type: string }> } };
    expect(dashboard.panels.length).toBeGreaterThan(0);
    const empty = dashboard.panels.filter((panel) => !(panel.targets ?? []).some((target) => (target.expr ?? '').trim() !== ''));
    expect(empty.map((panel) => panel.title)).toEqual([]);
    expect(dashboard.templating.list).toContainEqual(expect.objectContaining({ name: 'DS_PROMETHEUS', type: 'datasource' }));
  });

  test('the dashboard queries every metric of domain/metrics.ts', () => {
    const queried = new Set(metricNamesIn(DASHBOARD_TEXT));
    const missing = SPECS.filter((spec) => {
      const name = exportedName(spec);
      return !queried.has(name) && !queried.has(`${name}_bucket`);
    }).map(exportedName);
    expect(missing).toEqual([]);
  });

  test('the alert rules in the doc query only metrics the exporter serves', () => {
    const blocks = alertRuleBlocks(DOC);
    expect(blocks.length).toBeGreaterThan(0);
    for (const block of blocks) {
      const unknown = metricNamesIn(block).filter((name) => !SERIES.has(name));
      expect(unknown).toEqual([]);
      // Every rule has its expression.
      const alerts = block.match(/^\s*- alert: /gm) ?? [];
      const exprs = block.match(/^\s*expr: /gm) ?? [];
      expect(exprs.length).toBe(alerts.length);
    }
  });
});
