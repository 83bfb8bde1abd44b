/**
 * What the soak keeps about the items that went wrong (duplicated, wrong output, lost, flipped),
 * so a defect can be traced after the environment is gone: each item's object (status and
 * conditions), its Events and its execution marker lines (which carry when and where each
 * execution ran). Written next to the purged environment, not inside it.
 */
import { cpSync, statSync, writeFileSync } from 'node:fs';
import type { KubeClient } from '../../lib/kube/client.ts';
import type { KubeObject } from '../../lib/kube/types.ts';
import { verdict, type Outcome } from './accounting.ts';

interface Obj {
  metadata: { name?: string; uid?: string; creationTimestamp?: string };
  status?: unknown;
}

interface EventObj {
  involvedObject?: { name?: string; kind?: string };
  reason?: string;
  message?: string;
  type?: string;
  count?: number;
  source?: { component?: string };
  reportingComponent?: string;
  firstTimestamp?: string;
  lastTimestamp?: string;
  eventTime?: string;
}

export interface ItemDiagnosis {
  name: string;
  kind: string;
  verdict: string;
  phases: string[];
  markers: string[];
  object?: { uid?: string; created?: string; status?: unknown };
  events: { at?: string; type?: string; reason?: string; message?: string; from?: string; count?: number }[];
}

const BAD = new Set(['duplicated', 'wrong-output', 'lost', 'flipped']);

/** The marker lines of an item: its own key, or a workflow's per-step keys (`<name>/<step>`). */
export function markerLines(text: string, name: string): string[] {
  return text.split('\n').filter((l) => {
    const key = l.split(' ')[0] ?? '';
    return key === name || key.startsWith(`${name}/`);
  });
}

/** Events grouped by the object they are about, oldest first. */
export function eventsByObject(events: EventObj[]): Map<string, ItemDiagnosis['events']> {
  const by = new Map<string, ItemDiagnosis['events']>();
  const at = (e: EventObj): string | undefined => e.eventTime ?? e.firstTimestamp ?? e.lastTimestamp;
  const sorted = [...events].sort((a, b) => (at(a) ?? '').localeCompare(at(b) ?? ''));
  for (const e of sorted) {
    const name = e.involvedObject?.name ?? '';
    const list = by.get(name) ?? [];
    list.push({
      at: at(e),
      type: e.type,
      reason: e.reason,
      message: e.message,
      from: e.reportingComponent || e.source?.component,
      count: e.count,
    });
    by.set(name, list);
  }
  return by;
}

/** One diagnosis per item whose verdict is a defect; nothing for items that ended as they should. */
export function diagnose(
  outcomes: Outcome[],
  objects: Map<string, Obj>,
  markersText: string,
  events: Map<string, ItemDiagnosis['events']>,
): ItemDiagnosis[] {
  return outcomes
    .filter((o) => BAD.has(verdict(o)))
    .map((o) => {
      const obj = objects.get(o.name);
      return {
        name: o.name,
        kind: o.kind,
        verdict: verdict(o),
        phases: o.phases,
        markers: markerLines(markersText, o.name),
        ...(obj
          ? { object: { uid: obj.metadata.uid, created: obj.metadata.creationTimestamp, status: obj.status } }
          : {}),
        events: events.get(o.name) ?? [],
      };
    });
}

/** Lists the namespace's Events (best effort) and writes the diagnoses to `file`; returns how many. */
export async function writeDiagnoses(
  api: KubeClient,
  ns: string,
  file: string,
  input: { outcomes: Outcome[]; objects: Map<string, Obj>; markersText: string },
): Promise<number> {
  const events = await api
    .list<KubeObject>(`/api/v1/namespaces/${ns}/events`)
    .then((l) => l.items as EventObj[])
    .catch(() => [] as EventObj[]);
  const found = diagnose(input.outcomes, input.objects, input.markersText, eventsByObject(events));
  if (found.length) writeFileSync(file, `${JSON.stringify(found, null, 2)}\n`);
  return found.length;
}

/** Copies every log file of the environment (components and containers, `*.log`) to `dest`, keeping paths. */
export function keepLogs(root: string, dest: string): void {
  cpSync(root, dest, {
    recursive: true,
    filter: (src) => src.endsWith('.log') || statSync(src, { throwIfNoEntry: false })?.isDirectory() === true,
  });
}
