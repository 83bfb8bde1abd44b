/** A Run: condition timeline, outputs, artifacts (download), Events, live logs and the cancel action. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { getJSON, KRT, post, useAccess, useLog, useWatch, type Obj } from './api.ts';
import { ago, duration, href, Loading, Phase, Refused, Section, str } from './common.tsx';

const TERMINAL = new Set(['Succeeded', 'Failed', 'Timeout', 'Cancelled']);

function Timeline({ run }: { run: Obj }) {
  const cs = [...(run.status?.conditions ?? [])].sort((a, b) =>
    (a.lastTransitionTime ?? '').localeCompare(b.lastTransitionTime ?? ''),
  );
  return (
    <ol class="timeline">
      <li>
        <span class="when">{run.metadata.creationTimestamp}</span> <b>Created</b>
      </li>
      {cs.map((c) => (
        <li key={c.type} class={c.status === 'True' ? 'ok' : 'muted'}>
          <span class="when">{c.lastTransitionTime}</span> <b>{c.type}</b>={c.status} {c.reason && <i>{c.reason}</i>}{' '}
          <span class="message">{c.message}</span>
        </li>
      ))}
    </ol>
  );
}

interface Artifact {
  name: string;
  type: string;
  sizeBytes: number;
  digest?: string;
}

function Artifacts({ ns, run, phase }: { ns: string; run: string; phase: string }) {
  const [items, setItems] = useState<Artifact[] | undefined>(undefined);
  const [err, setErr] = useState<{ code: number; reason: string; message: string } | undefined>(undefined);
  useEffect(() => {
    if (!TERMINAL.has(phase)) return;
    getJSON<{ items: Artifact[] }>(`/api/artifacts/${ns}/${run}`)
      .then((r) => setItems(r.items))
      .catch((e: { code: number; reason: string; message: string }) => setErr(e));
  }, [ns, run, phase]);
  if (err) return <Refused error={err} what="list this Run's artifacts" />;
  if (!items)
    return <div class="muted">{TERMINAL.has(phase) ? 'loading…' : 'artifacts are listed when the Run ends'}</div>;
  if (!items.length) return <div class="muted">no artifacts</div>;
  return (
    <ul class="artifacts">
      {items.map((a) => (
        <li key={a.name}>
          <a href={`/api/artifacts/${ns}/${run}/${encodeURIComponent(a.name)}`} download>
            {a.name}
          </a>{' '}
          <span class="muted">
            {a.type}, {a.sizeBytes} bytes {a.digest ? `sha256 ${a.digest.slice(0, 12)}…` : ''}
          </span>
        </li>
      ))}
    </ul>
  );
}

function Events({ ns, kind, name }: { ns: string; kind: string; name: string }) {
  const ev = useWatch(`/api/v1/namespaces/${ns}/events`, {
    fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name}`,
  });
  if (ev.error) return <Refused error={ev.error} what="read Events" />;
  const items = [...ev.items].sort((a, b) =>
    str(a.lastTimestamp ?? a.eventTime).localeCompare(str(b.lastTimestamp ?? b.eventTime)),
  );
  if (ev.synced && !items.length) return <div class="muted">no Events</div>;
  return (
    <table>
      <tbody>
        {items.map((e) => (
          <tr key={e.metadata.name}>
            <td>{ago(str(e.lastTimestamp ?? e.eventTime))}</td>
            <td>{str(e.type)}</td>
            <td>{str(e.reason)}</td>
            <td>{str(e.message)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function Logs({ ns, run }: { ns: string; run: string }) {
  const log = useLog(ns, run);
  const box = useRef<HTMLPreElement>(null);
  useEffect(() => {
    const el = box.current;
    if (el && el.scrollHeight - el.scrollTop - el.clientHeight < 80) el.scrollTop = el.scrollHeight;
  }, [log.lines.length]);
  if (log.state === 'refused' && log.error) return <Refused error={log.error} what="read this Run's logs" />;
  return (
    <div class="logs">
      <div class="muted log-state" data-state={log.state}>
        {log.state === 'retrying'
          ? `reconnecting (${log.error?.reason ?? ''}: ${log.error?.message ?? ''})…`
          : log.state === 'waiting'
            ? 'waiting for the Run to start…'
            : log.state === 'ended'
              ? 'end of log'
              : log.state === 'live'
                ? 'following'
                : 'connecting…'}
      </div>
      <pre ref={box} class="log">
        {log.lines.map((l) => (
          <div class={l.stream === 'stderr' ? 'stderr' : ''} key={l.cursor ?? l.time}>
            {l.message}
          </div>
        ))}
      </pre>
    </div>
  );
}

function CancelRun({ ns, run, phase }: { ns: string; run: string; phase: string }) {
  const [allowed] = useAccess([{ namespace: ns, verb: 'patch', resource: 'runs', name: run }]) ?? [undefined];
  const [msg, setMsg] = useState('');
  if (TERMINAL.has(phase)) return null;
  if (allowed === false) return <span class="muted no-cancel">cancel: not allowed</span>;
  return (
    <>
      <button
        class="danger"
        disabled={allowed !== true}
        onClick={() =>
          void post(`/api/runs/${ns}/${run}/cancel`).then(
            () => setMsg('cancellation requested'),
            (e: Error) => setMsg(e.message),
          )
        }
      >
        Cancel Run
      </button>
      {msg && <span class="muted"> {msg}</span>}
    </>
  );
}

function Outputs({ run }: { run: Obj }) {
  const outputs = Object.entries((run.status?.outputs as Record<string, string>) ?? {});
  if (!outputs.length) return <div class="muted">no outputs</div>;
  return (
    <table>
      <tbody>
        {outputs.map(([k, v]) => (
          <tr key={k}>
            <td>{k}</td>
            <td>
              <code>{v}</code>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function RunPage({ ns, name }: { ns: string; name: string }) {
  const w = useWatch(`${KRT}/namespaces/${ns}/runs`, { fieldSelector: `metadata.name=${name}` });
  const run = w.items[0];
  if (w.error) return <Refused error={w.error} what="read this Run" />;
  if (!run)
    return (
      <Section title={`Run ${name}`}>
        {w.synced ? <div class="muted">not found</div> : <Loading synced={false} />}
      </Section>
    );
  const phase = run.status?.phase ?? 'Pending';
  return (
    <>
      <p class="crumbs">
        <a href={href('ns', ns, 'runs')}>{ns}</a> / Run
      </p>
      <Section title={`Run ${name}`} actions={<CancelRun ns={ns} run={name} phase={phase} />}>
        <div class="facts">
          <Phase phase={phase} /> <span>runtime {str(run.spec?.runtime)}</span>{' '}
          <span>pod {str(run.status?.assignedPod)}</span> <span>attempt {str(run.status?.attempt ?? 1)}</span>{' '}
          <span>duration {duration(run.status?.startTime, run.status?.completionTime)}</span>
          {run.metadata.labels?.['workflows.kruntimes.io/workflowrun'] && (
            <a href={href('ns', ns, 'workflowruns', run.metadata.labels['workflows.kruntimes.io/workflowrun'])}>
              WorkflowRun
            </a>
          )}
        </div>
        {run.status?.message && <div class="message">{str(run.status.message)}</div>}
      </Section>
      <div class="grid2">
        <Section title="Timeline">
          <Timeline run={run} />
        </Section>
        <Section title="Outputs">
          <Outputs run={run} />
          <h3>Artifacts</h3>
          <Artifacts ns={ns} run={name} phase={phase} />
        </Section>
      </div>
      <Section title="Logs">
        <Logs ns={ns} run={name} />
      </Section>
      <Section title="Events">
        <Events ns={ns} kind="Run" name={name} />
      </Section>
    </>
  );
}
