/**
 * Run logs benchmark (not a test): logs.kruntimes.io through API aggregation against a direct
 * `pods/log` read of the Runtime Pod's runtimed container, measured in the same run on the same
 * Runtime Pod, printed side by side with ratios (aggregated / direct).
 *   - snapshot latency p50/p99 for 100 and 500 lines (direct: pods/log?tailLines=N, the raw lines
 *     of all Runs on the Pod; aggregated: the Run's records, tailLines=N)
 *   - follow time-to-first-record: request sent -> first record of a Running Run received
 *   - sustained follow throughput: a Run writing BENCH_FOLLOW_LINES lines as fast as it can,
 *     followed live (connected before the first line); MB/s of delivered Run output (message
 *     bytes + newline) from first to last record received, and of the bytes on the wire. The
 *     Runtime Server caps a Run's output at 1 MiB per stream, so each Run is a ~1 MB burst and
 *     the rate is summed over several Runs
 *   npx tsx bench/logs.ts      (BENCH_SNAPSHOTS=100, BENCH_TTFR=20, BENCH_FOLLOW_LINES=9000, BENCH_FOLLOW_ROUNDS=5)
 */
import { join } from 'node:path';
import type { IncomingMessage } from 'node:http';
import { down, up } from '../localenv/environment.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import type { KubeClient } from '../lib/kube/client.ts';
import type { KubeObject } from '../lib/kube/types.ts';
import { cpuDelta, cpuTicks } from './cpu.ts';
import { interleaved, ms, ratio, summary } from './stats.ts';
import { benchRuntime } from './runtime.ts';
import { windowLines } from '../apiserver/logs/handler.ts';

const NS = 'bench';
const SNAPSHOTS = Number(process.env.BENCH_SNAPSHOTS ?? '100');
const TTFR = Number(process.env.BENCH_TTFR ?? '20');
/** 9000 lines of 107 bytes stay under the Runtime Server's 1 MiB per-stream output cap. */
const FOLLOW_LINES = Number(process.env.BENCH_FOLLOW_LINES ?? '9000');
const LINE = 'x'.repeat(100);
type Run = KubeObject & { status?: { phase?: string; assignedPod?: string } };
const aggPath = (run: string): string => `/apis/logs.kruntimes.io/v1alpha1/namespaces/${NS}/runs/${run}/log`;
const podPath = (pod: string): string => `/api/v1/namespaces/${NS}/pods/${pod}/log`;
const sleep = (n: number): Promise<void> => new Promise((r) => setTimeout(r, n));
const mbps = (bytes: number, msec: number): string => `${(bytes / 1e6 / (msec / 1000)).toFixed(2)} MB/s`;

async function waitRun(api: KubeClient, name: string, ok: (r: Run) => boolean): Promise<Run> {
  for (;;) {
    const r = await api.get<Run>(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs/${name}`);
    if (ok(r)) return r;
    await sleep(20);
  }
}

async function createRun(api: KubeClient, name: string, script: string): Promise<void> {
  await api.create(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs`, {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Run',
    metadata: { name },
    spec: { runtime: 'bench-bash', source: { inline: script } },
  });
}

async function setup(api: KubeClient): Promise<void> {
  await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  await api.create(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runtimes`, benchRuntime('bench-bash', 1, 8));
  for (;;) {
    const s = await api
      .get<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
        '/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.logs.kruntimes.io',
      )
      .catch(() => undefined);
    if (s?.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True')) break;
    await sleep(100);
  }
}

async function timed(fn: () => Promise<unknown>, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    out.push(performance.now() - t);
  }
  return out;
}

/**
 * Where an aggregated snapshot's time goes: the backend's two reads made directly by the bench
 * (the Run GET, the Pod log since the Run's creation), interleaved; the rest is the aggregator's
 * hop to the extension server and the Run-UID filter.
 */
async function snapshotHops(api: KubeClient, snap: Run): Promise<void> {
  const runPath = `/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs/snap`;
  const since = `${podPath(snap.status?.assignedPod ?? '')}?container=runtimed&sinceTime=${encodeURIComponent(snap.metadata.creationTimestamp ?? '')}`;
  const r = await interleaved(SNAPSHOTS, {
    'aggregated tailLines=100': () => api.request('GET', aggPath('snap'), { query: { tailLines: 100 } }),
    'Run GET': () => api.get(runPath),
    'pods/log since the Run was created': () => api.getText(since),
    [`the same, tailLines=${windowLines(100)} (the window)`]: () =>
      api.getText(`${since}&tailLines=${windowLines(100)}`),
    // The aggregation hop alone: a discovery document the extension server answers from memory.
    'aggregated discovery (the hop alone)': () => api.get('/apis/logs.kruntimes.io/v1alpha1'),
    'kube-apiserver discovery': () => api.get('/apis/kruntimes.io/v1alpha1'),
    'pods/log tailLines=100': () =>
      api.getText(`${podPath(snap.status?.assignedPod ?? '')}?container=runtimed&tailLines=100`),
  });
  process.stdout.write(`snapshot hops (the backend's reads made directly, interleaved, ${SNAPSHOTS} each)\n`);
  for (const [k, v] of Object.entries(r)) process.stdout.write(`  ${k.padEnd(36)} p50 ${ms(summary(v.lat).p50)}\n`);
}

async function snapshots(api: KubeClient, pod: string): Promise<void> {
  process.stdout.write(
    `snapshot latency (${SNAPSHOTS} requests each, sequential, finished Run with 1000 lines on a Pod log of ${(await api.getText(`${podPath(pod)}?container=runtimed`)).split('\n').length} lines)\n`,
  );
  for (const n of [100, 500]) {
    await timed(() => api.request('GET', aggPath('snap'), { query: { tailLines: n } }), 5);
    const agg = summary(
      await timed(async () => {
        const r = await api.request<{ items: unknown[] }>('GET', aggPath('snap'), { query: { tailLines: n } });
        if (r.items.length !== n) throw new Error(`aggregated snapshot returned ${r.items.length} records, want ${n}`);
      }, SNAPSHOTS),
    );
    const direct = summary(
      await timed(() => api.getText(`${podPath(pod)}?container=runtimed&tailLines=${n}`), SNAPSHOTS),
    );
    process.stdout.write(
      `  ${String(n).padStart(3)} lines  aggregated p50 ${ms(agg.p50)} p99 ${ms(agg.p99)}   direct pods/log p50 ${ms(direct.p50)} p99 ${ms(direct.p99)}   ratio p50 ${ratio(agg.p50, direct.p50)} p99 ${ratio(agg.p99, direct.p99)}\n`,
    );
  }
}

/** Resolves with the time until the first chunk holding a complete line arrived; then drops the stream. */
async function firstLine(open: () => Promise<IncomingMessage>, match: (line: string) => boolean): Promise<number> {
  const t = performance.now();
  const res = await open();
  return new Promise((resolve, reject) => {
    let buf = '';
    res.on('data', (c: Buffer) => {
      buf += c.toString('utf8');
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      if (lines.some(match)) {
        resolve(performance.now() - t);
        res.destroy();
      }
    });
    res.on('error', () => undefined);
    res.on('end', () => reject(new Error('stream ended before the first record')));
  });
}

async function timeToFirstRecord(api: KubeClient, pod: string): Promise<void> {
  await createRun(api, 'ttfr', `echo ready; sleep ${Math.ceil(TTFR * 0.5) + 30}`);
  const r = await waitRun(api, 'ttfr', (x) => x.status?.phase === 'Running');
  const uid = r.metadata.uid ?? '';
  await sleep(500);
  const agg: number[] = [];
  const direct: number[] = [];
  for (let i = 0; i < TTFR; i++) {
    agg.push(
      await firstLine(
        () => api.stream(aggPath('ttfr'), { query: { follow: 'true' } }),
        (l) => l.includes('"message":"ready"'),
      ),
    );
    direct.push(
      await firstLine(
        () => api.stream(podPath(pod), { query: { container: 'runtimed', follow: 'true', tailLines: 1 } }),
        (l) => l.length > 0,
      ),
    );
  }
  await api.patch(`/apis/kruntimes.io/v1alpha1/namespaces/${NS}/runs/ttfr`, { spec: { cancelRequested: true } });
  const a = summary(agg.slice(2));
  const d = summary(direct.slice(2));
  process.stdout.write(
    `follow time-to-first-record (${TTFR} follows each of a Running Run, first 2 dropped; run uid ${uid.slice(0, 8)})\n`,
  );
  process.stdout.write(
    `  aggregated p50 ${ms(a.p50)} p99 ${ms(a.p99)}   direct pods/log p50 ${ms(d.p50)} p99 ${ms(d.p99)}   ratio p50 ${ratio(a.p50, d.p50)} p99 ${ratio(a.p99, d.p99)}\n`,
  );
}

interface Drain {
  payload: number;
  wire: number;
  records: number;
  firstAt: number;
  lastAt: number;
}

/** Reads NDJSON/log lines until `done` says the last one arrived; counts the Run's message bytes. */
function drain(
  res: IncomingMessage,
  message: (line: string) => string | undefined,
  done: (m: string) => boolean,
): Promise<Drain> {
  const d: Drain = { payload: 0, wire: 0, records: 0, firstAt: 0, lastAt: 0 };
  return new Promise((resolve, reject) => {
    let buf = '';
    res.on('data', (c: Buffer) => {
      d.wire += c.length;
      buf += c.toString('utf8');
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      for (const l of lines) {
        const m = message(l);
        if (m === undefined) continue;
        const now = performance.now();
        if (!d.records) d.firstAt = now;
        d.lastAt = now;
        d.records++;
        d.payload += Buffer.byteLength(m) + 1;
        if (done(m)) {
          resolve(d);
          res.destroy();
          return;
        }
      }
    });
    res.on('error', () => undefined);
    res.on('end', () => reject(new Error(`stream ended after ${d.records} records`)));
  });
}

function recordOf(uid: string): (line: string) => string | undefined {
  return (line) => {
    if (!line.includes(uid)) return undefined;
    try {
      const o = JSON.parse(line) as { run_uid?: string; message?: string };
      return o.run_uid === uid ? o.message : undefined;
    } catch {
      return undefined;
    }
  };
}

async function followRun(api: KubeClient, name: string, direct: boolean): Promise<Drain> {
  // The follower connects during the initial sleep, so every record is delivered live.
  await createRun(api, name, `sleep 1.5; for i in $(seq 1 ${FOLLOW_LINES}); do echo "$i ${LINE}"; done; echo END`);
  const r = await waitRun(api, name, (x) => !!x.status?.assignedPod);
  const res = direct
    ? await api.stream(podPath(r.status?.assignedPod ?? ''), {
        query: { container: 'runtimed', follow: 'true', sinceTime: r.metadata.creationTimestamp },
      })
    : await api.stream(aggPath(name), { query: { follow: 'true' } });
  const parse = direct
    ? recordOf(r.metadata.uid ?? '')
    : (l: string): string | undefined => (l ? (JSON.parse(l) as { message: string }).message : undefined);
  const d = await drain(res, parse, (m) => m === 'END');
  await waitRun(api, name, (x) => ['Succeeded', 'Failed'].includes(x.status?.phase ?? ''));
  return d;
}

async function throughput(api: KubeClient): Promise<void> {
  const mine = (cmd: string): boolean => cmd.includes('kruntimes') || cmd.includes('bench');
  const rows: [string, Drain, string][] = [];
  const rounds = Number(process.env.BENCH_FOLLOW_ROUNDS ?? '5');
  for (let i = 0; i < 2 * rounds; i++) {
    const direct = i % 2 === 1;
    const before = cpuTicks(mine);
    const d = await followRun(api, `follow-${i}`, direct);
    rows.push([direct ? 'direct pods/log' : 'aggregated', d, cpuDelta(before, cpuTicks(mine))]);
  }
  process.stdout.write(
    `sustained follow throughput (Run writing ${FOLLOW_LINES + 1} lines of ~${LINE.length + 7} bytes as fast as bash can, followed live; alternating, ${rounds} rounds each)\n`,
  );
  for (const [what, d, cpu] of rows) {
    const t = d.lastAt - d.firstAt;
    process.stdout.write(
      `  ${what.padEnd(16)} ${d.records} records in ${(t / 1000).toFixed(2)} s: output ${mbps(d.payload, t)}, wire ${mbps(d.wire, t)}; CPU ${cpu}\n`,
    );
  }
  const rate = (direct: boolean): number => {
    const ds = rows.filter(([w]) => (w !== 'aggregated') === direct).map(([, d]) => d);
    return ds.reduce((s, d) => s + d.payload, 0) / ds.reduce((s, d) => s + (d.lastAt - d.firstAt), 0);
  };
  process.stdout.write(`  ratio of output MB/s, aggregated / direct: ${ratio(rate(false), rate(true))}\n`);
}

async function main(): Promise<void> {
  const root = join(REPO_ROOT, '.kruntimes', 'bench', `logs-${process.pid}`);
  const env = await up({
    root,
    nodes: ['bench-logs'],
    ...(process.env.KRT_BIN_DIR ? { binDir: process.env.KRT_BIN_DIR } : {}),
  });
  const api = env.admin;
  try {
    await setup(api);
    await createRun(api, 'snap', `for i in $(seq 1 1000); do echo "$i ${LINE}"; done`);
    const snap = await waitRun(api, 'snap', (x) => x.status?.phase === 'Succeeded');
    const pod = snap.status?.assignedPod ?? '';
    await snapshots(api, pod);
    await snapshotHops(api, snap);
    if (process.env.BENCH_SNAPSHOT_ONLY === '1') return;
    await timeToFirstRecord(api, pod);
    await throughput(api);
  } finally {
    api.close();
    if (process.env.BENCH_KEEP !== '1') await down(root, { purge: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
