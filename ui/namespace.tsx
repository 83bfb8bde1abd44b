/** One namespace: Runs (filterable), Runtimes with their Pods and slots, Workflows/WorkflowRuns, PersistentWorkspaces. */
import { useState } from 'preact/hooks';
import { KRT, post, useAccess, useWatch, type Obj, type WatchState } from './api.ts';
import { ago, duration, href, lastReason, Loading, Phase, Refused, Section, str } from './common.tsx';
import { DevWorkspaces } from './devworkspaces.tsx';

const ACTIVE = new Set(['Scheduled', 'Running', 'Ready']);

function RunsTable({ ns, runs }: { ns: string; runs: WatchState }) {
  const [filter, setFilter] = useState('');
  if (runs.error) return <Refused error={runs.error} what="list Runs" />;
  const f = filter.toLowerCase();
  const rows = runs.items
    .map((r) => ({ r, reason: lastReason(r), phase: r.status?.phase ?? 'Pending' }))
    .filter(({ r, reason, phase }) =>
      [r.metadata.name, phase, str(r.spec?.runtime), str(r.status?.assignedPod), reason].some((v) =>
        v.toLowerCase().includes(f),
      ),
    )
    .sort((a, b) => (b.r.metadata.creationTimestamp ?? '').localeCompare(a.r.metadata.creationTimestamp ?? ''));
  return (
    <>
      <input
        class="filter"
        placeholder="filter: name, phase, runtime, pod, reason"
        value={filter}
        onInput={(e) => setFilter(e.currentTarget.value)}
      />
      <Loading synced={runs.synced} />
      <table class="runs">
        <thead>
          <tr>
            <th>Name</th>
            <th>Phase</th>
            <th>Runtime</th>
            <th>Pod</th>
            <th>Age</th>
            <th>Duration</th>
            <th>Attempts</th>
            <th>Last reason</th>
          </tr>
        </thead>
        <tbody>
          {rows.map(({ r, reason, phase }) => (
            <tr key={r.metadata.name} data-run={r.metadata.name} data-rv={r.metadata.resourceVersion}>
              <td>
                <a href={href('ns', ns, 'runs', r.metadata.name)}>{r.metadata.name}</a>
              </td>
              <td>
                <Phase phase={phase} />
              </td>
              <td>{str(r.spec?.runtime)}</td>
              <td>{str(r.status?.assignedPod)}</td>
              <td>{ago(r.metadata.creationTimestamp)}</td>
              <td>{duration(r.status?.startTime, r.status?.completionTime)}</td>
              <td>{str(r.status?.attempt ?? 1)}</td>
              <td>{reason}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function heartbeat(pod: Obj): { ok: boolean; at: string } {
  const c = (pod.status?.conditions ?? []).find((x) => x.type === 'kruntimes.io/RuntimedReady');
  const probe = (c as { lastProbeTime?: string } | undefined)?.lastProbeTime;
  return { ok: c?.status === 'True', at: probe ?? c?.lastTransitionTime ?? '' };
}

function PodRow({ pod, used, cap }: { pod: Obj; used: number; cap: number }) {
  const hb = heartbeat(pod);
  const c = Number(pod.metadata.annotations?.['kruntimes.io/capacity.runs'] ?? cap);
  return (
    <tr>
      <td>{pod.metadata.name}</td>
      <td>{str(pod.status?.phase)}</td>
      <td>
        <span class="slots">
          {Array.from({ length: c }, (_, i) => (
            <span key={i} class={i < used ? 'slot used' : 'slot'} />
          ))}
        </span>{' '}
        {used}/{c}
      </td>
      <td class={hb.ok ? 'ok' : 'bad'}>{hb.ok ? `ready, ${ago(hb.at)} ago` : 'not ready'}</td>
    </tr>
  );
}

function RuntimeCard({ rt, pods, used }: { rt: Obj; pods: Obj[]; used: Map<string, number> }) {
  const name = rt.metadata.name;
  const cap = Number(
    (rt.spec?.capacity as { resources?: { runs?: number | string } } | undefined)?.resources?.runs ?? 2,
  );
  return (
    <div class="card" data-runtime={name}>
      <h3>
        {name} <span class="muted">{str(rt.status?.readyReplicas ?? 0)} ready</span>
      </h3>
      <table>
        <thead>
          <tr>
            <th>Pod</th>
            <th>Phase</th>
            <th>Slots used</th>
            <th>Heartbeat</th>
          </tr>
        </thead>
        <tbody>
          {pods
            .filter((p) => p.metadata.labels?.['kruntimes.io/runtime'] === name)
            .map((p) => (
              <PodRow key={p.metadata.name} pod={p} used={used.get(p.metadata.name) ?? 0} cap={cap} />
            ))}
        </tbody>
      </table>
    </div>
  );
}

function Runtimes({ ns, runs }: { ns: string; runs: Obj[] }) {
  const rts = useWatch(`${KRT}/namespaces/${ns}/runtimes`);
  const pods = useWatch(`/api/v1/namespaces/${ns}/pods`, { labelSelector: 'kruntimes.io/runtime' });
  if (rts.error) return <Refused error={rts.error} what="list Runtimes" />;
  const used = new Map<string, number>();
  for (const r of runs)
    if (ACTIVE.has(r.status?.phase ?? '') && r.status?.assignedPod)
      used.set(str(r.status.assignedPod), (used.get(str(r.status.assignedPod)) ?? 0) + 1);
  return (
    <div class="cards">
      <Loading synced={rts.synced} />
      {pods.error && <Refused error={pods.error} what="list Runtime Pods" />}
      {rts.items.map((rt) => (
        <RuntimeCard key={rt.metadata.name} rt={rt} pods={pods.items} used={used} />
      ))}
    </div>
  );
}

interface InputSpec {
  type?: 'string' | 'boolean' | 'number';
  required?: boolean;
  default?: string;
  description?: string;
}

/** A Workflow's declared inputs as a form; the server binds and checks them (400 InvalidInput). */
function TriggerForm({ wf, onTrigger }: { wf: Obj; onTrigger: (inputs: Record<string, string>) => void }) {
  const decl = (wf.spec?.inputs as Record<string, InputSpec> | undefined) ?? {};
  const [values, setValues] = useState<Record<string, string>>(() =>
    Object.fromEntries(Object.entries(decl).map(([k, v]) => [k, v.default ?? ''])),
  );
  const set = (k: string, v: string): void => setValues({ ...values, [k]: v });
  const submit = (e: Event): void => {
    e.preventDefault();
    // Only what the user filled in (or a default): an empty optional input is left to the Workflow.
    onTrigger(Object.fromEntries(Object.entries(values).filter(([, v]) => v !== '')));
  };
  return (
    <form class="trigger" data-trigger={wf.metadata.name} onSubmit={submit}>
      {Object.entries(decl).map(([k, spec]) => (
        <label key={k}>
          {k}
          {spec.required ? ' *' : ''}
          {spec.type === 'boolean' ? (
            <select name={k} value={values[k] ?? ''} onChange={(e) => set(k, e.currentTarget.value)}>
              <option value="" />
              <option value="true">true</option>
              <option value="false">false</option>
            </select>
          ) : (
            <input
              name={k}
              inputMode={spec.type === 'number' ? 'numeric' : 'text'}
              value={values[k] ?? ''}
              placeholder={spec.description ?? spec.type ?? 'string'}
              onInput={(e) => set(k, e.currentTarget.value)}
            />
          )}
        </label>
      ))}
      <button type="submit">Run</button>
    </form>
  );
}

function WorkflowRow({ wf, canTrigger, trigger }: { wf: Obj; canTrigger: boolean; trigger: Trigger }) {
  const [open, setOpen] = useState(false);
  const hasInputs = Object.keys((wf.spec?.inputs as object | undefined) ?? {}).length > 0;
  const name = wf.metadata.name;
  return (
    <>
      <tr data-workflow={name}>
        <td>{name}</td>
        <td>{Object.keys((wf.spec?.jobs as object) ?? {}).join(', ')}</td>
        <td>{ago(wf.metadata.creationTimestamp)}</td>
        <td>
          {canTrigger && (
            <button onClick={() => (hasInputs ? setOpen(!open) : trigger(name, {}))}>
              {hasInputs && open ? 'Close' : 'Trigger'}
            </button>
          )}
        </td>
      </tr>
      {open && (
        <tr>
          <td colSpan={4}>
            <TriggerForm wf={wf} onTrigger={(inputs) => trigger(name, inputs)} />
          </td>
        </tr>
      )}
    </>
  );
}

type Trigger = (name: string, inputs: Record<string, string>) => void;

function Workflows({ ns }: { ns: string }) {
  const wfs = useWatch(`${KRT}/namespaces/${ns}/workflows`);
  const wfrs = useWatch(`${KRT}/namespaces/${ns}/workflowruns`);
  const [canTrigger] = useAccess([{ namespace: ns, verb: 'create', resource: 'workflowruns' }]) ?? [false];
  const [msg, setMsg] = useState('');
  const trigger: Trigger = (name, inputs) => {
    post<{ name: string }>(`/api/workflows/${ns}/${name}/trigger`, { inputs })
      .then((r) => (location.hash = href('ns', ns, 'workflowruns', r.name)))
      .catch((e: Error) => setMsg(e.message));
  };
  return (
    <>
      {msg && (
        <div class="refused" role="alert">
          {msg}
        </div>
      )}
      {wfs.error ? (
        <Refused error={wfs.error} what="list Workflows" />
      ) : (
        <table>
          <thead>
            <tr>
              <th>Workflow</th>
              <th>Jobs</th>
              <th>Age</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {wfs.items.map((w) => (
              <WorkflowRow key={w.metadata.name} wf={w} canTrigger={canTrigger === true} trigger={trigger} />
            ))}
          </tbody>
        </table>
      )}
      <h3>WorkflowRuns</h3>
      {wfrs.error ? (
        <Refused error={wfrs.error} what="list WorkflowRuns" />
      ) : (
        <WorkflowRuns ns={ns} items={wfrs.items} />
      )}
    </>
  );
}

function WorkflowRuns({ ns, items }: { ns: string; items: Obj[] }) {
  const sorted = [...items].sort((a, b) =>
    (b.metadata.creationTimestamp ?? '').localeCompare(a.metadata.creationTimestamp ?? ''),
  );
  return (
    <table>
      <thead>
        <tr>
          <th>Name</th>
          <th>Workflow</th>
          <th>Phase</th>
          <th>Jobs</th>
          <th>Age</th>
        </tr>
      </thead>
      <tbody>
        {sorted.map((w) => {
          const jobs = Object.values((w.status?.jobs as Record<string, { phase?: string }>) ?? {});
          return (
            <tr key={w.metadata.name}>
              <td>
                <a href={href('ns', ns, 'workflowruns', w.metadata.name)}>{w.metadata.name}</a>
              </td>
              <td>{w.metadata.labels?.['workflows.kruntimes.io/workflow'] ?? ''}</td>
              <td>
                <Phase phase={w.status?.phase} />
              </td>
              <td>
                {jobs.filter((j) => j.phase === 'Succeeded').length}/{jobs.length} succeeded
              </td>
              <td>{ago(w.metadata.creationTimestamp)}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

function Workspaces({ ns }: { ns: string }) {
  const ws = useWatch(`${KRT}/namespaces/${ns}/persistentworkspaces`);
  if (ws.error) return <Refused error={ws.error} what="list PersistentWorkspaces" />;
  return (
    <table>
      <thead>
        <tr>
          <th>Name</th>
          <th>Phase</th>
          <th>Runtime</th>
          <th>Bound Pod</th>
          <th>Last used</th>
          <th>Age</th>
        </tr>
      </thead>
      <tbody>
        {ws.items.map((w) => (
          <tr key={w.metadata.name}>
            <td>{w.metadata.name}</td>
            <td>
              <Phase phase={w.status?.phase} />
            </td>
            <td>{str(w.status?.runtime ?? w.spec?.runtime)}</td>
            <td>{str(w.status?.boundPod)}</td>
            <td>{ago(w.status?.lastUsedTime as string | undefined)}</td>
            <td>{ago(w.metadata.creationTimestamp)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

const TABS = ['runs', 'runtimes', 'workflows', 'workspaces', 'devworkspaces'] as const;
const TAB_TITLES: Record<string, string> = { devworkspaces: 'Dev workspaces' };
const title = (t: string): string => TAB_TITLES[t] ?? `${t[0]?.toUpperCase()}${t.slice(1)}`;

export function Namespace({ ns, tab }: { ns: string; tab: string }) {
  const runs = useWatch(`${KRT}/namespaces/${ns}/runs`);
  const t = (TABS as readonly string[]).includes(tab) ? tab : 'runs';
  return (
    <>
      <nav class="tabs">
        {TABS.map((x) => (
          <a key={x} class={x === t ? 'active' : ''} href={href('ns', ns, x)}>
            {title(x)}
          </a>
        ))}
      </nav>
      <Section title={`${title(t)} in ${ns}`}>
        {t === 'runs' && <RunsTable ns={ns} runs={runs} />}
        {t === 'runtimes' && <Runtimes ns={ns} runs={runs.items} />}
        {t === 'workflows' && <Workflows ns={ns} />}
        {t === 'workspaces' && <Workspaces ns={ns} />}
        {t === 'devworkspaces' && <DevWorkspaces ns={ns} />}
      </Section>
    </>
  );
}
