/** krt invoke <run> [-d JSON | -f file]: one call of a Ready function Run through its Runtime Gateway. */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { closeInvokeAgents, endpointOf, invokeEndpoint, InvokeError } from '../../lib/invoke/client.ts';
import { connect, UsageError } from '../kube.ts';

/** The payload of `krt invoke`: -d JSON, -f FILE (`-` is stdin) or null; bad JSON is a usage error. */
export function payloadOf(o: { data?: string; file?: string }, read: (f: string) => string): unknown {
  if (o.data !== undefined && o.file !== undefined) throw new UsageError('give either -d JSON or -f FILE, not both');
  const text = o.data ?? (o.file !== undefined ? read(o.file === '-' ? '/dev/stdin' : o.file) : 'null');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new UsageError(`the payload is not JSON: ${text.slice(0, 80)}`);
  }
}

export function registerInvoke(program: Command): void {
  program
    .command('invoke')
    .description(
      'call a Ready function Run through its Runtime Gateway with your kubeconfig token (one call at a time per Run)',
    )
    .argument('<run>')
    .option('-d, --data <json>', 'JSON payload')
    .option('-f, --file <file>', 'read the JSON payload from a file (- for stdin)')
    .option('--token <token>', 'bearer token to use instead of the kubeconfig user token')
    .action(async (name: string, o: { data?: string; file?: string; token?: string }, cmd: Command) => {
      const c = connect(cmd.optsWithGlobals<{ kubeconfig?: string; namespace?: string }>());
      const payload = payloadOf(o, (f) => readFileSync(f, 'utf8'));
      const token = o.token ?? c.client.bearerToken();
      if (!token)
        throw new UsageError(
          'the gateway takes a Kubernetes bearer token: the kubeconfig user has none (client certificate?); pass --token',
        );
      try {
        const r = await invokeEndpoint(await endpointOf(c.client, c.namespace, name), token, payload);
        process.stdout.write(`${JSON.stringify(r.output)}\n`);
        process.stderr.write(`invocation ${r.invocationId}\n`);
      } catch (err) {
        if (!(err instanceof InvokeError)) throw err;
        process.stderr.write(
          `krt invoke: ${err.code} ${err.reason}: ${err.message}${err.invocationId ? ` (invocation ${err.invocationId})` : ''}\n`,
        );
        process.exitCode = err.code === 429 ? 4 : 3;
      } finally {
        closeInvokeAgents();
      }
    });
}
