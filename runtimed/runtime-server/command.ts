/** How a Runtime Server turns an execution request into argv (upstream §2.11 semantics). */
import { existsSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';

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

export function chooseCommand(
  lang: Language,
  req: ExecRequest,
  exists: (p: string) => boolean = existsSync,
): CommandChoice {
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
