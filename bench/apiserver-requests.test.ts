import assert from 'node:assert/strict';
import { parseCounters, perUnit } from './apiserver-requests.ts';

describe('bench: kube-apiserver request counters', () => {
  it('sums requests by verb and resource, watch events by resource and webhook calls, per unit', () => {
    const at = (n: number): string =>
      [
        '# HELP apiserver_request_total x',
        `apiserver_request_total{code="201",component="apiserver",dry_run="",group="kruntimes.io",resource="runs",scope="resource",subresource="",verb="POST",version="v1alpha1"} ${n}`,
        `apiserver_request_total{code="409",component="apiserver",dry_run="",group="kruntimes.io",resource="runs",scope="resource",subresource="",verb="POST",version="v1alpha1"} 1`,
        `apiserver_request_total{code="200",component="apiserver",dry_run="",group="kruntimes.io",resource="runs",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} ${2 * n}`,
        `apiserver_watch_events_total{group="kruntimes.io",resource="runs",version="v1alpha1"} ${5 * n}`,
        `apiserver_admission_webhook_request_total{code="200",name="runs.kruntimes.io",operation="CREATE",rejected="false",type="validating"} ${n}`,
      ].join('\n');
    const before = parseCounters(at(10));
    assert.equal(before.get('POST runs'), 11);
    assert.equal(
      perUnit(before, parseCounters(at(20)), 10),
      'watch events runs 5.00, PATCH runs/status 2.00, POST runs 1.00, webhook runs.kruntimes.io CREATE 1.00',
    );
  });
});
