/**
 * The I/O half of the OpenSandbox substrate (opensandbox.ts holds the decisions): where the server
 * is (the ConfigMap kruntimes-devws: `openSandboxEndpoint`, optional `openSandboxImage`; the API
 * key from the Secret kruntimes-devws-opensandbox, key `apiKey`, both in the relay's namespace,
 * read by name), one list of the Project's sandboxes before the steps decide, and the calls the
 * decision asked for afterwards. The key only travels to the client.
 */
import type { Project } from '../../lib/devws/api.ts';
import type { Operation as FnOp } from '../../lib/fn/types.ts';
import { OpenSandboxClient, type SandboxApi } from '../../lib/opensandbox/client.ts';
import { checkEndpoint, type EndpointPolicy } from '../../lib/opensandbox/endpoint.ts';
import { sharedTransport } from '../../lib/opensandbox/transport.ts';
import { endpointPolicy } from '../../lib/jobclass/config.ts';
import {
  CREATE_TIMEOUT_MS,
  DEFAULT_SETTINGS,
  OpenSandboxSubstrate,
  observeProject,
  perform,
  type Call,
  type OpenSandboxSettings,
} from './opensandbox.ts';

/** The Secret (relay namespace) holding the OpenSandbox API key under `apiKey`. */
export const OPENSANDBOX_SECRET = 'kruntimes-devws-opensandbox';

export interface OpenSandboxConfig {
  endpoint: string;
  apiKey: string;
  settings: OpenSandboxSettings;
}

interface DataLike {
  data?: Record<string, string>;
}

/** The configured server, or why there is none (never names the key). */
export function openSandboxConfig(
  cm: DataLike | undefined,
  secret: DataLike | undefined,
  policy: EndpointPolicy,
): OpenSandboxConfig | { problem: string } {
  const endpoint = cm?.data?.openSandboxEndpoint;
  if (!endpoint) return { problem: 'the ConfigMap kruntimes-devws has no openSandboxEndpoint' };
  const check = checkEndpoint(endpoint, policy);
  if (!check.ok) return { problem: check.message };
  const raw = secret?.data?.apiKey;
  if (!raw) return { problem: `the Secret ${OPENSANDBOX_SECRET} has no apiKey` };
  const image = cm?.data?.openSandboxImage;
  return {
    endpoint,
    apiKey: Buffer.from(raw, 'base64').toString('utf8').trim(),
    settings: { ...DEFAULT_SETTINGS, ...(image ? { image } : {}) },
  };
}

export interface OpenSandboxDeps {
  api(c: OpenSandboxConfig): SandboxApi;
  policy(): EndpointPolicy;
  log(msg: string): void;
}

export function defaultOpenSandboxDeps(env: NodeJS.ProcessEnv = process.env): OpenSandboxDeps {
  return {
    policy: () => endpointPolicy(env),
    api: (c) => {
      const transport = sharedTransport(env.KRT_OPENSANDBOX_CA_FILE);
      return new OpenSandboxClient({
        endpoint: c.endpoint,
        apiKey: c.apiKey,
        policy: endpointPolicy(env),
        transport,
        createTimeoutMs: CREATE_TIMEOUT_MS,
      });
    },
    log: (msg) => process.stderr.write(`devws-controller opensandbox: ${msg}\n`),
  };
}

/**
 * Creates this process already sent, by effect ID and sentAt: a create is sent at most once per
 * sentAt here (a second send in the window after a restart is what the duplicate cleanup is for).
 */
const sent = new Map<string, number>();

function once(calls: Call[], sentAtOf: (id: string) => string | undefined, now: number): Call[] {
  for (const [k, at] of sent) if (now - at > 10 * 60_000) sent.delete(k);
  return calls.filter((c) => {
    if (c.kind !== 'create') return true;
    const k = `${c.id}@${sentAtOf(c.id) ?? ''}`;
    if (sent.has(k)) return false;
    sent.set(k, now);
    return true;
  });
}

/**
 * One invocation on an OpenSandbox Project: list its sandboxes, decide over them, and (`act`:
 * only the Operation's own key, so one decision per change sends) run the calls.
 */
export async function withOpenSandbox(
  project: Project,
  config: OpenSandboxConfig,
  decide: (sub: OpenSandboxSubstrate) => FnOp[],
  o: { act: boolean; deps: OpenSandboxDeps; now: Date; sentAtOf: (id: string) => string | undefined },
): Promise<FnOp[]> {
  const api = o.deps.api(config);
  const listed = await observeProject(api, project.metadata.uid ?? '');
  if (!listed.ok) {
    o.deps.log(`list of Project ${project.metadata.name ?? ''}: ${listed.error} (nothing decided)`);
    return [{ op: 'requeue', afterMs: 5000 }];
  }
  const sub = new OpenSandboxSubstrate(
    listed.sandboxes,
    { uid: project.metadata.uid ?? '', namespace: project.metadata.namespace ?? '' },
    config.settings,
  );
  const ops = decide(sub);
  if (o.act)
    await perform(api, [...once(sub.calls, o.sentAtOf, o.now.getTime()), ...sub.duplicates()], (m) => o.deps.log(m));
  return ops;
}
