/** Shared pieces: time formatting, phase badges, refusals, links. */
import type { ComponentChildren } from 'preact';
import type { Condition, Obj, Refusal } from './api.ts';

export function ago(ts: string | undefined, now = Date.now()): string {
  if (!ts) return '';
  return span(now - Date.parse(ts));
}

export function span(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? `${s % 60}s` : ''}`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600)}h`;
}

export function duration(start: unknown, end: unknown, now = Date.now()): string {
  if (typeof start !== 'string') return '';
  return span((typeof end === 'string' ? Date.parse(end) : now) - Date.parse(start));
}

/** The reason of the most recent condition (what last happened to the object). */
export function lastReason(o: Obj): string {
  const cs = [...(o.status?.conditions ?? [])].sort((a: Condition, b: Condition) =>
    (a.lastTransitionTime ?? '').localeCompare(b.lastTransitionTime ?? ''),
  );
  return cs.at(-1)?.reason ?? '';
}

export function Phase({ phase }: { phase: string | undefined }) {
  const p = phase ?? 'Pending';
  return (
    <span class={`phase phase-${p}`} data-phase={p}>
      {p}
    </span>
  );
}

export function Refused({ error, what }: { error: Refusal; what: string }) {
  return (
    <div class="refused" role="alert">
      <strong>{error.code === 403 ? `You are not allowed to ${what}.` : `Could not ${what}.`}</strong>{' '}
      <span class="reason">
        {error.reason} (HTTP {error.code})
      </span>
      <div class="message">{error.message}</div>
    </div>
  );
}

export function Section({
  title,
  children,
  actions,
}: {
  title: string;
  children: ComponentChildren;
  actions?: ComponentChildren;
}) {
  return (
    <section>
      <header class="section-head">
        <h2>{title}</h2>
        <div class="actions">{actions}</div>
      </header>
      {children}
    </section>
  );
}

export function Loading({ synced }: { synced: boolean }) {
  return synced ? null : <div class="muted">loading…</div>;
}

export const href = (...parts: string[]): string => `#/${parts.map(encodeURIComponent).join('/')}`;

export const str = (v: unknown): string =>
  v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v);
