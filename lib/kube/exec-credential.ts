/**
 * Kubeconfig `exec` credential plugins (client.authentication.k8s.io ExecCredential): the command
 * prints an ExecCredential whose `status.token` is the bearer token. The token is cached until
 * `status.expirationTimestamp` (for the process lifetime when absent) and the command re-run after.
 * Only token credentials are supported; a plugin answering with a client certificate gets a clear
 * error. The token is never logged.
 */
import { execFileSync } from 'node:child_process';

export interface ExecConfig {
  command: string;
  args?: string[] | null;
  env?: { name: string; value: string }[] | null;
  apiVersion?: string;
}

interface ExecCredential {
  kind?: string;
  status?: { token?: string; expirationTimestamp?: string; clientCertificateData?: string };
}

export type RunCommand = (command: string, args: string[], env: NodeJS.ProcessEnv) => string;

const runCommand: RunCommand = (command, args, env) =>
  execFileSync(command, args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 60_000 });

/** Parses the plugin's output; throws a clear error for anything but a token credential. */
export function parseExecCredential(command: string, out: string): { token: string; expiresAt?: number } {
  let cred: ExecCredential;
  try {
    cred = JSON.parse(out) as ExecCredential;
  } catch {
    throw new Error(`exec credential plugin ${command} did not print an ExecCredential (JSON)`);
  }
  const token = cred.status?.token;
  if (cred.kind !== 'ExecCredential' || !token) {
    const why = cred.status?.clientCertificateData
      ? 'client certificate credentials are not supported'
      : 'no status.token';
    throw new Error(`exec credential plugin ${command}: ${why}; print an ExecCredential with status.token`);
  }
  const at = cred.status?.expirationTimestamp ? Date.parse(cred.status.expirationTimestamp) : NaN;
  return Number.isFinite(at) ? { token, expiresAt: at } : { token };
}

/** A token source for KubeClient that runs the plugin when it has no unexpired token. */
export function execTokenSource(
  exec: ExecConfig,
  now: () => number = Date.now,
  run: RunCommand = runCommand,
): () => string {
  let cached: { token: string; expiresAt?: number } | undefined;
  const apiVersion = exec.apiVersion ?? 'client.authentication.k8s.io/v1';
  return () => {
    if (cached && (cached.expiresAt === undefined || cached.expiresAt - 10_000 > now())) return cached.token;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...Object.fromEntries((exec.env ?? []).map((e) => [e.name, e.value])),
      KUBERNETES_EXEC_INFO: JSON.stringify({ apiVersion, kind: 'ExecCredential', spec: { interactive: false } }),
    };
    cached = parseExecCredential(exec.command, run(exec.command, exec.args ?? [], env));
    return cached.token;
  };
}
