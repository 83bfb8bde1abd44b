/** How a Runtime Server turns an execution request into argv (upstream §2.11 semantics). */
import { existsSync } from 'node:fs';
import { basename, isAbsolute, join } from 'node:path';

export type Language = 'bash' | 'python';

export interface ExecRequest {
  id: string;
  entrypoint?: string;
  args?: string[];
  env?: Record<string, string>;
  workingDir: string;
  timeoutSeconds?: number;
}

export type CommandChoice = { ok: true; argv: string[] } | { ok: false; message: string };

/**
 * Pure: `bash ...` with `--norc` first, so it never sources ~/.bashrc. `bash -c` does when its
 * stdin is a socket (Node's pipes are socket pairs) or SSH_CLIENT is set, and SHLVL is below 1,
 * taking itself for a command run by rshd or sshd (on a machine whose root ~/.bashrc runs
 * `pyenv init`, that hung). Any other command is returned as is.
 */
export function withNorc(argv: string[]): string[] {
  const [bin, ...rest] = argv;
  if (!bin || basename(bin) !== 'bash' || rest[0] === '--norc') return argv;
  return [bin, '--norc', ...rest];
}

export function chooseCommand(
  lang: Language,
  req: ExecRequest,
  exists: (p: string) => boolean = existsSync,
): CommandChoice {
  const c = chooseArgv(lang, req, exists);
  return c.ok ? { ok: true, argv: withNorc(c.argv) } : c;
}

function chooseArgv(lang: Language, req: ExecRequest, exists: (p: string) => boolean): CommandChoice {
  const args = req.args ?? [];
  const entry = req.entrypoint || 'script';
  const file = isAbsolute(entry) ? entry : join(req.workingDir, entry);
  if (lang === 'python') {
    if (exists(file)) return { ok: true, argv: ['python3', file, ...args] };
    if (args.length) return { ok: true, argv: ['python3', ...args] };
    return { ok: false, message: 'no script or args provided' };
  }
  if (exists(file)) return { ok: true, argv: ['bash', file, ...args] };
  if (args.length >= 3 && (args[0] === 'sh' || args[0] === 'bash') && args[1] === '-c') return { ok: true, argv: args };
  if (args.length === 1) return { ok: true, argv: ['bash', '-c', args[0] ?? ''] };
  if (args.length > 1) return { ok: true, argv: ['bash', '-c', `${args.join('\n')}\n`] };
  return { ok: false, message: 'no args or script provided' };
}
