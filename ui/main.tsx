/** The dashboard's entry: a hash router over the pages. */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Namespace } from './namespace.tsx';
import { Namespaces } from './namespaces.tsx';
import { RunPage } from './run.tsx';
import { WorkflowRunPage } from './workflowrun.tsx';

function route(hash: string) {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  const [a, ns, kind, name] = parts;
  if (a !== 'ns' || !ns) return <Namespaces />;
  if (kind === 'runs' && name) return <RunPage key={`${ns}/${name}`} ns={ns} name={name} />;
  if (kind === 'workflowruns' && name) return <WorkflowRunPage key={`${ns}/${name}`} ns={ns} name={name} />;
  return <Namespace key={ns} ns={ns} tab={kind ?? 'runs'} />;
}

function App() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const on = (): void => setHash(location.hash);
    addEventListener('hashchange', on);
    // A hash change between the first render and this effect fired no listener: read it now.
    on();
    return () => removeEventListener('hashchange', on);
  }, []);
  return (
    <>
      <header class="top">
        <a href="#/" class="brand">
          kruntimes
        </a>
        <span class="muted">dashboard</span>
      </header>
      <main>{route(hash)}</main>
    </>
  );
}

const root = document.getElementById('app');
if (root) render(<App />, root);
