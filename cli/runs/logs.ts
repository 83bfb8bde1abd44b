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
      if (code === 409 && /not assigned to a Runtime Pod yet/.test((err as Error).message) && attempt < 300) {
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
