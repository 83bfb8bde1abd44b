/**
 * What the unit tests of a function's call path share (call-channel.test.ts,
 * runtime-server/bash-worker.test.ts): a real Runtime Server dialling runtimed's socket, in this
 * process, with runtimed's RuntimeClient over it; a directory of handler files; and bash handlers
 * of one shape (a `case` on the payload, echoing any other payload).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { tempDir } from '../lib/fs/temp-dir.ts';
import { DialIn } from './dial-in.ts';
import { RuntimeClient } from './runtime-client.ts';
import type { Language } from './runtime-server/command.ts';
import { startRuntimeServer, type RuntimeServer } from './runtime-server/server.ts';

/** A Runtime Server and runtimed's client of it, over a socket in `dir`. */
export interface RuntimePair {
  dial: DialIn;
  srv: RuntimeServer;
  client: RuntimeClient;
  /** Ends the client, the Runtime Server (with its workers) and the socket. */
  close: () => void;
}

/** Starts a Runtime Server of `lang` with `env` dialling the socket `name` in `dir`, and runtimed's client of it. */
export async function runtimePair(
  dir: string,
  lang: Language,
  env: NodeJS.ProcessEnv,
  name = 'rt.sock',
): Promise<RuntimePair> {
  const dial = new DialIn(join(dir, name));
  await dial.listen();
  const srv = startRuntimeServer(dial.path, lang, env);
  const client = new RuntimeClient(dial);
  const close = (): void => {
    client.close();
    srv.close();
    dial.close();
  };
  return { dial, srv, client, close };
}

/** A new temporary directory (`prefix`) holding `files`: relative path → text (removed when the process exits). */
export function dirWith(prefix: string, files: Record<string, string>): string {
  const dir = tempDir(prefix);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

/**
 * The text of a bash file defining `f`, which runs `cases[payload]` for those payloads (JSON text,
 * e.g. `"quit"`) and prints any other payload as it came; `before` comes first (run when sourced).
 */
export function bashCases(cases: Record<string, string>, before: string[] = []): string {
  const arms = Object.entries(cases).map(([payload, body]) => `  '${payload}') ${body} ;;`);
  return [...before, 'f() {', '  case $1 in', ...arms, '  *) printf "%s" "$1" ;;', '  esac', '}', ''].join('\n');
}

/** A describe block's Runtime Server pair over its directory, set by the block's `before` hook. */
export interface BlockPair {
  dir: string;
  pair: RuntimePair;
  srv: RuntimeServer;
  client: RuntimeClient;
}

/**
 * Registers the enclosing describe block's hooks: before its specs, a new directory (`prefix`) with
 * `files` and a Runtime Server of `lang` over it; after them, both go. The fields are set by then.
 */
export function pairPerBlock(prefix: string, lang: Language, files: Record<string, string>): BlockPair {
  const b = {} as BlockPair;
  before(async () => {
    b.dir = dirWith(prefix, files);
    b.pair = await runtimePair(b.dir, lang, { PATH: process.env.PATH });
    b.srv = b.pair.srv;
    b.client = b.pair.client;
  });
  after(() => {
    b.pair.close();
    rmSync(b.dir, { recursive: true, force: true });
  });
  return b;
}
