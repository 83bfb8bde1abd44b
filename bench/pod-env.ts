/**
 * The environment a bench gives the per-Pod components it starts as local processes: the
 * caller's, without its locale. In the cluster the node agent sets no locale variable (a Runtime
 * Pod gets PATH, HOME, HOSTNAME and the KUBERNETES_* variables), so a Runtime Server started with
 * the caller's LANG would measure another locale than the cluster runs in (a bash worker reads
 * payloads by their bytes, which costs more in a UTF-8 locale).
 */

/** Pure: `env` without LANG, LANGUAGE and LC_* (the C locale, as in a Runtime Pod), plus `extra`. */
export function podEnv(env: NodeJS.ProcessEnv, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env)) if (k !== 'LANG' && k !== 'LANGUAGE' && !k.startsWith('LC_')) out[k] = v;
  return { ...out, ...extra };
}
