/** The CLI's connection: the current kubeconfig only (--kubeconfig, KUBECONFIG or ~/.kube/config). */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { clientFromKubeConfig } from '../lib/kube/config.ts';
import type { KubeClient } from '../lib/kube/client.ts';
import { VERSION } from '../lib/version.ts';

export interface Conn {
  client: KubeClient;
  namespace: string;
}

export function connect(opts: { kubeconfig?: string; namespace?: string }): Conn {
  const path = opts.kubeconfig ?? process.env.KUBECONFIG?.split(':')[0] ?? join(homedir(), '.kube', 'config');
  if (!existsSync(path))
    throw new UsageError(`no kubeconfig at ${path}: set KUBECONFIG or pass --kubeconfig (try: krt local up)`);
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  const ctx = kc.getContextObject(kc.getCurrentContext());
  return {
    client: clientFromKubeConfig(kc, `krt/${VERSION}`),
    namespace: opts.namespace ?? ctx?.namespace ?? 'default',
  };
}

/** Wrong usage: exit code 2. */
export class UsageError extends Error {}
