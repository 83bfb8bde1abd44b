/** The namespaces the caller may see (or the kubeconfig's own when listing namespaces is not allowed). */
import { useEffect, useState } from 'preact/hooks';
import { getJSON, useWatch } from './api.ts';
import { ago, href, Loading, Section } from './common.tsx';

export function Namespaces() {
  const ns = useWatch('/api/v1/namespaces');
  const [own, setOwn] = useState<string>('');
  useEffect(() => {
    void getJSON<{ namespace: string }>('/api/config').then((c) => setOwn(c.namespace));
  }, []);
  const items = ns.error ? [] : ns.items.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  return (
    <Section title="Namespaces">
      <Loading synced={ns.synced} />
      {ns.error && (
        <p class="muted">
          You may not list namespaces ({ns.error.reason}); your kubeconfig's namespace is{' '}
          <a href={href('ns', own)}>{own}</a>.
        </p>
      )}
      {!ns.error && (
        <table>
          <thead>
            <tr>
              <th>Name</th>
              <th>Status</th>
              <th>Age</th>
            </tr>
          </thead>
          <tbody>
            {items.map((n) => (
              <tr key={n.metadata.name}>
                <td>
                  <a href={href('ns', n.metadata.name)}>{n.metadata.name}</a>
                  {n.metadata.name === own ? <span class="tag">kubeconfig</span> : null}
                </td>
                <td>{String(n.status?.phase ?? '')}</td>
                <td>{ago(n.metadata.creationTimestamp)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Section>
  );
}
