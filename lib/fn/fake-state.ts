/** An in-memory State for unit tests of function handlers (what the relay's informers would hold). */
import type { KubeObject } from '../kube/types.ts';
import { resourcePath, type Resource, type State } from './types.ts';

export class FakeState implements State {
  private readonly byKey = new Map<string, KubeObject>();
  constructor(items: [Resource, KubeObject][] = []) {
    for (const [r, o] of items) this.put(r, o);
  }
  private key(r: Resource, ns: string | undefined, name: string): string {
    return `${resourcePath(r)}|${r.namespaced ? (ns ?? '') : ''}|${name}`;
  }
  put(r: Resource, o: KubeObject): this {
    this.byKey.set(this.key(r, o.metadata.namespace, o.metadata.name ?? ''), o);
    return this;
  }
  remove(r: Resource, ns: string | undefined, name: string): this {
    this.byKey.delete(this.key(r, ns, name));
    return this;
  }
  get(r: Resource, ns: string | undefined, name: string): KubeObject | undefined {
    return this.byKey.get(this.key(r, ns, name));
  }
  list(r: Resource, ns?: string, sel?: Record<string, string>): KubeObject[] {
    const prefix = `${resourcePath(r)}|`;
    return [...this.byKey.entries()]
      .filter(([k]) => k.startsWith(prefix))
      .map(([, o]) => o)
      .filter((o) => !ns || o.metadata.namespace === ns)
      .filter((o) => Object.entries(sel ?? {}).every(([k, v]) => o.metadata.labels?.[k] === v));
  }
}
