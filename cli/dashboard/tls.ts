/**
 * The in-cluster dashboard's HTTPS server: its certificate is the `dashboard.crt`/`dashboard.key`
 * pair the tls-certificates function issues for the dashboard's Service (mounted from the Secret
 * kruntimes-extension-tls), and a rotated pair is picked up without a restart, as the extension
 * API server does: both files are polled, and a new pair replaces the old one only once it loads
 * (a half-written rotation, e.g. a new certificate with the old key, keeps the old pair serving).
 */
import https from 'node:https';
import type { RequestListener } from 'node:http';
import { createSecureContext } from 'node:tls';
import { FollowedFiles } from '../../lib/fs/followed-files.ts';

export interface ServingTls {
  certFile: string;
  keyFile: string;
  /** How often the files are checked for a rotated pair (ms); 2 s by default. */
  checkMs?: number;
}

/** What a reload did: `reloaded`, or `kept` with the reason the new files did not load. */
export type ReloadEvent = { event: 'reloaded' } | { event: 'kept'; err: unknown };

const options = ([cert, key]: Buffer[]): https.ServerOptions => ({ cert, key, minVersion: 'TLSv1.2' });

/** Reads the pair and starts following it (a clear error when it is missing or does not match). */
function firstOptions(
  tls: ServingTls,
  onChange: (pair: Buffer[]) => void,
): { files: FollowedFiles; o: https.ServerOptions } {
  try {
    const files = new FollowedFiles([tls.certFile, tls.keyFile], tls.checkMs ?? 2000, onChange);
    const o = options(files.contents);
    try {
      createSecureContext(o);
    } catch (err) {
      files.stop();
      throw err;
    }
    return { files, o };
  } catch (err) {
    throw new Error(
      `the dashboard's serving certificate ${tls.certFile} and key ${tls.keyFile} do not load (mount dashboard.crt and dashboard.key of the Secret kruntimes-extension-tls): ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/** An HTTPS server for `app` whose certificate follows the files; `stop` ends the polling. */
export function secureServer(
  app: RequestListener,
  tls: ServingTls,
  onReload: (e: ReloadEvent) => void = () => undefined,
): { server: https.Server; stop: () => void } {
  const reload = (pair: Buffer[]): void => {
    try {
      server.setSecureContext(options(pair));
      onReload({ event: 'reloaded' });
    } catch (err) {
      onReload({ event: 'kept', err });
    }
  };
  const { files, o } = firstOptions(tls, reload);
  const server = https.createServer(o, app);
  return { server, stop: () => files.stop() };
}
