/**
 * What a benchmark phase asked of kube-apiserver: requests by verb and resource, watch events sent
 * by resource and admission webhook calls, from kube-apiserver's own /metrics before and after (counters, so the difference
 * is exact; requests of every client, the benchmark's own included).
 */
import type { KubeClient } from '../lib/kube/client.ts';

export type Counters = Map<string, number>;

const LINE =
  /^(apiserver_request_total|apiserver_watch_events_total|apiserver_admission_webhook_request_total)\{([^}]*)\} ([0-9.e+]+)$/;

/** Sums the counters of a /metrics text by (verb resource/subresource), watched resource and webhook. */
export function parseCounters(text: string): Counters {
  const out: Counters = new Map();
  for (const line of text.split('\n')) {
    const m = LINE.exec(line);
    if (!m) continue;
    const labels: Record<string, string | undefined> = Object.fromEntries(
      [...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1]!, x[2]!]),
    );
    const key =
      m[1] === 'apiserver_request_total'
        ? `${labels.verb ?? ''} ${labels.resource ?? ''}${labels.subresource ? `/${labels.subresource}` : ''}`
        : m[1] === 'apiserver_watch_events_total'
          ? `watch events ${labels.resource ?? labels.kind ?? ''}`
          : `webhook ${labels.name ?? ''} ${labels.operation ?? ''}`;
    out.set(key, (out.get(key) ?? 0) + Number(m[3]));
  }
  return out;
}

export async function apiCounters(admin: KubeClient): Promise<Counters> {
  return parseCounters(await admin.getText('/metrics'));
}

/** "verb resource n.n" per unit (a Run), largest first, for what changed by at least 0.05 per unit. */
export function perUnit(before: Counters, after: Counters, units: number): string {
  return [...after]
    .map(([k, v]) => [k, (v - (before.get(k) ?? 0)) / units] as const)
    .filter(([, v]) => v >= 0.05)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v.toFixed(2)}`)
    .join(', ');
}
