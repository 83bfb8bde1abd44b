/** Developer Workspaces (dev.kruntimes.io): state, the current Operation and its step; start/stop when RBAC allows. */
import { useState } from 'preact/hooks';
import { post, useAccess, useWatch, type Obj } from './api.ts';
import { ago, Loading, Refused, str } from './common.tsx';

const DEV = '/apis/dev.kruntimes.io/v1alpha1';

interface CurrentOperation {
  name?: string;
  state?: string;
  step?: string;
}

/** The Operation a Workspace names, with its step list (from the Operations watch) when readable. */
function OperationCell({ op, ops }: { op: CurrentOperation | undefined; ops: Obj[] }) {
  if (!op?.name) return <span class="muted">none</span>;
  const full = ops.find((o) => o.metadata.name === op.name);
  const steps = (full?.status?.steps as string[] | undefined) ?? [];
  // The Operation's own status is the live one; the Workspace's reference is written less often.
  const step = str(full?.status?.step ?? op.step);
  const state = str(full?.status?.state ?? op.state ?? 'queued');
  return (
    <span class="operation" data-operation={op.name} data-state={state} data-step={step}>
      {op.name} <span class={`phase phase-${state}`}>{state}</span>
      {steps.length > 0 ? (
        <span class="steps">
          {steps.map((s) => (
            <span key={s} class={s === step ? 'step current' : 'step'}>
              {s}
            </span>
          ))}
        </span>
      ) : (
        step && <span class="step current">{step}</span>
      )}
      {full?.status?.reason ? <span class="muted"> {str(full.status.reason)}</span> : null}
    </span>
  );
}

function Row({ ws, ops, may, act }: { ws: Obj; ops: Obj[]; may: boolean; act: (n: string, a: string) => void }) {
  const name = ws.metadata.name;
  const observed = str(ws.status?.observedState ?? 'provisioning');
  return (
    <tr data-devworkspace={name}>
      <td>{name}</td>
      <td>{str(ws.spec?.project)}</td>
      <td>{str(ws.spec?.kind)}</td>
      <td>{str(ws.spec?.desiredState)}</td>
      <td>
        <span class={`phase phase-${observed}`} data-phase={observed}>
          {observed}
        </span>
      </td>
      <td>
        <OperationCell op={ws.status?.operation as CurrentOperation | undefined} ops={ops} />
      </td>
      <td>{ago(ws.metadata.creationTimestamp)}</td>
      <td class="actions">
        {may && (
          <>
            <button onClick={() => act(name, 'start')}>Start</button>{' '}
            <button class="danger" onClick={() => act(name, 'stop')}>
              Stop
            </button>
          </>
        )}
      </td>
    </tr>
  );
}

export function DevWorkspaces({ ns }: { ns: string }) {
  const wss = useWatch(`${DEV}/namespaces/${ns}/workspaces`);
  const ops = useWatch(`${DEV}/namespaces/${ns}/operations`);
  const [may] = useAccess([{ namespace: ns, verb: 'create', group: 'dev.kruntimes.io', resource: 'operations' }]) ?? [
    false,
  ];
  const [msg, setMsg] = useState('');
  const act = (name: string, action: string): void => {
    setMsg('');
    post<{ name: string }>(`/api/devworkspaces/${ns}/${name}/${action}`)
      .then((r) => setMsg(`${action} requested: Operation ${r.name}`))
      .catch((e: Error) => setMsg(`${action} refused: ${e.message}`));
  };
  if (wss.error) return <Refused error={wss.error} what="list developer Workspaces" />;
  return (
    <>
      {msg && (
        <div class={msg.includes('refused') ? 'refused' : 'notice'} role="status">
          {msg}
        </div>
      )}
      <Loading synced={wss.synced} />
      <table class="devworkspaces">
        <thead>
          <tr>
            <th>Workspace</th>
            <th>Project</th>
            <th>Kind</th>
            <th>Desired</th>
            <th>Observed</th>
            <th>Current operation and step</th>
            <th>Age</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {wss.items.map((w) => (
            <Row key={w.metadata.name} ws={w} ops={ops.items} may={may === true} act={act} />
          ))}
        </tbody>
      </table>
    </>
  );
}
