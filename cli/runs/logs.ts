/** krt logs: snapshots and follow with cursor-based reconnects over logs.kruntimes.io. */
import type { Conn } from '../kube.ts';

interface Item {
  time: string;
  stream: string;
  message: string;
  cursor?: string;
}
const path = (c: Conn, name: string): string =>
  `/apis/logs.kruntimes.io/v1alpha1/namespaces/${c.namespace}/runs/${name}/log`;

function print(i: Item): void {
  (i.stream === 'stderr' ? process.stderr : process.stdout).write(`${i.message}\n`);
}

export async function snapshotLogs(c: Conn, name: string, tail?: string): Promise<void> {
  const res = await c.client.request<{ items: Item[] }>('GET', path(c, name), { query: { tailLines: tail } });
  for (const i of res.items) print(i);
}

function printLines(lines: string[], cursor: string | undefined): string | undefined {
  let c = cursor;
  for (const line of lines.filter(Boolean)) {
    const item = JSON.parse(line) as Item;
    print(item);
    c = item.cursor ?? c;
  }
  return c;
}

/**
 * The logs API's answer for a Run whose logs do not exist yet (not assigned to a Runtime Pod, or
 * its runtimed container not started): 400 BadRequest "is waiting to start", as `pods/log` says
 * of a container. 409 Conflict means the Runtime Pod is gone, and is never retried.
 */
export function waitingToStart(err: unknown): boolean {
  return err instanceof Error && (err as { code?: number }).code === 400 && /is waiting to start/.test(err.message);
}

/** Streams records; on a dropped connection reconnects with the last cursor (no loss, no duplicates). */
export async function followLogs(c: Conn, name: string, tail?: string, maxRetries = 20): Promise<void> {
  let cursor: string | undefined;
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await c.client.stream(path(c, name), {
        query: { follow: 'true', ...(cursor ? { cursor } : { tailLines: tail }) },
      });
      let buf = '';
      for await (const chunk of res) {
        buf += (chunk as Buffer).toString('utf8');
        const lines = buf.split('\n');
        buf = lines.pop() ?? '';
        cursor = printLines(lines, cursor);
      }
      if (!res.complete) throw new Error('log stream interrupted');
      return;
    } catch (err) {
      const code = (err as { code?: number }).code;
      // A Run that is not scheduled yet has no logs: wait for it (krt run --follow right after create).
      if (waitingToStart(err) && attempt < 300) {
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      if (typeof code === 'number' && code < 500 && code !== 429) throw err;
      if (attempt >= maxRetries) throw err;
      process.stderr.write(
        `krt: log stream lost (${err instanceof Error ? err.message : String(err)}); reconnecting${cursor ? ' from the last record' : ''}...\n`,
      );
      await new Promise((r) => setTimeout(r, Math.min(5000, 200 * 2 ** attempt)));
    }
  }
}
