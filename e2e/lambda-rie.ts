/**
 * The function's Lambda as host processes for tests and benchmarks: the AWS Lambda Runtime
 * Interface Emulator (scripts/build-lambda-rie.sh; KRT_LAMBDA_RIE_BIN) in front of aws-lambda-ric
 * running cmd/lambda.handler, the entrypoint of lambda/Dockerfile, which loads the JavaScript bundle
 * (dist/lambda.mjs; the local environment builds it on `up`) on plain node as in the image. Each instance is one
 * execution environment (one invocation at a time), listening on 127.0.0.1; the relay reaches it
 * at the Invoke API path with the function name `function`.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { freePort } from '../localenv/ports.ts';
import { REPO_ROOT } from '../localenv/paths.ts';
import { LAMBDA_FILE } from '../localenv/bundle.ts';
import { lambdaRequest } from '../lib/fn/lambda.ts';

export interface LambdaRie {
  /** Invoke API endpoints, one per execution environment (KRT_LAMBDA_ENDPOINT). */
  endpoints: string[];
  /** The relay's settings for these environments. */
  env: Record<string, string>;
  stop(): void;
}

function rieBin(): string {
  if (process.env.KRT_LAMBDA_RIE_BIN) return process.env.KRT_LAMBDA_RIE_BIN;
  const out = execFileSync('bash', [join(REPO_ROOT, 'scripts', 'build-lambda-rie.sh')], { encoding: 'utf8' });
  return out.trim().split('\n').pop()!;
}

async function startOne(
  bin: string,
  ric: string,
  env: Record<string, string>,
): Promise<ChildProcess & { url: string }> {
  const [port, apiPort] = [await freePort(), await freePort()];
  const args = ['--runtime-interface-emulator-address', `127.0.0.1:${port}`];
  args.push('--runtime-api-address', `127.0.0.1:${apiPort}`);
  // The image's entrypoint: plain node running aws-lambda-ric, which loads cmd/lambda.mjs (the bundle).
  // A process group of its own: stop() ends the emulator and the runtime it started.
  const child = spawn(bin, [...args, process.execPath, ric, 'cmd/lambda.handler'], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      NODE_OPTIONS: '',
      LAMBDA_TASK_ROOT: REPO_ROOT,
      LOG_LEVEL: 'warn',
      PINO_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'ignore', process.env.KRT_LAMBDA_RIE_LOG ? 'inherit' : 'ignore'],
    detached: true,
  });
  return Object.assign(child, { url: `http://127.0.0.1:${port}` });
}

/** Invokes until the environment answers: the first call runs the init phase (the functions load). */
async function warm(url: string, deadline: number): Promise<void> {
  const probe = lambdaRequest(url, 'function', {} as never);
  for (;;) {
    try {
      const res = await fetch(probe.url, { method: 'POST', headers: probe.headers, body: '{"warmup":true}' });
      const text = await res.text();
      if (res.status === 200 && text.includes('BadRequest')) return;
      throw new Error(`HTTP ${res.status}: ${text.slice(0, 200)}`);
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`Lambda emulator at ${url} did not answer: ${String(err)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Starts `count` execution environments of the watch functions (KRT_FUNCTIONS in `env` narrows them). */
export async function startLambdaRie(count = 1, env: Record<string, string> = {}): Promise<LambdaRie> {
  if (!existsSync(LAMBDA_FILE)) throw new Error(`${LAMBDA_FILE} is missing: build the bundle (npm run bundle)`);
  const bin = rieBin();
  const ric = createRequire(join(REPO_ROOT, 'package.json')).resolve('aws-lambda-ric');
  const children: (ChildProcess & { url: string })[] = [];
  const stop = (): void => {
    for (const c of children) if (c.pid && c.exitCode === null) process.kill(-c.pid, 'SIGKILL');
  };
  try {
    for (let i = 0; i < count; i++) children.push(await startOne(bin, ric, env));
    const deadline = Date.now() + 60_000;
    await Promise.all(children.map((c) => warm(c.url, deadline)));
  } catch (err) {
    stop();
    throw err;
  }
  const endpoints = children.map((c) => c.url);
  return {
    endpoints,
    env: { KRT_LAMBDA_ENDPOINT: endpoints.join(','), KRT_LAMBDA_FUNCTION_NAME: 'function' },
    stop,
  };
}
