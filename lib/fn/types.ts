/**
 * The function contract: a function declares its trigger and a handler
 * `(observed state, now) -> operations`. Hosts (watch relay, CronJob entrypoint, admission
 * router) apply the operations with optimistic concurrency. Handlers never talk to the API
 * server themselves; they read through the `State` they are given.
 */
import type { KubeObject } from '../kube/types.ts';

export interface Resource {
  group: string;
  version: string;
  /** Plural resource name, e.g. "configmaps". */
  resource: string;
  kind: string;
  namespaced: boolean;
}

export interface WatchTrigger {
  type: 'watch';
  resource: Resource;
  labelSelector?: string;
  fieldSelector?: string;
  /** Drop events that cannot change the outcome (e.g. status-only updates). */
  filter?: (event: { type: 'added' | 'updated' | 'deleted'; object: KubeObject; old?: KubeObject }) => boolean;
  /** Queue keys for an object of the primary kind (default: its namespace/name). Handlers then get
   * the key and look objects up in `state` (e.g. one key per namespace/runtime to batch work). */
  keys?: (o: KubeObject) => string[];
  /** Other kinds whose changes wake objects of the primary kind; map returns primary keys, and may
   * read the host's observed state to find them (e.g. the Jobs a class change unblocks, woken under
   * their own keys so that no two invocations ever act for one object at once). An event the
   * optional filter drops wakes nothing (nowMs: the host's clock, e.g. to judge a heartbeat's age). */
  also?: {
    resource: Resource;
    labelSelector?: string;
    map: (o: KubeObject, state: State) => string[];
    filter?: (
      event: { type: 'added' | 'updated' | 'deleted'; object: KubeObject; old?: KubeObject },
      nowMs: number,
    ) => boolean;
  }[];
  /** Kinds the handler reads by name with a live GET at invocation time instead of through a
   * cache (e.g. Secrets): the host needs only `get` on them, never list/watch. */
  fetch?: FetchDecl;
  /** When the handler next has anything to do for an object that passed `filter` (epoch ms, e.g.
   * a finished Run's TTL): the host queues its keys only then (a delayed add; an earlier one
   * wins), so events and relists before that invoke nothing. Undefined or past: at once. */
  dueAt?: (o: KubeObject) => number | undefined;
  /** Objects the handler never needs (e.g. finished Runs for the scheduler), given the key: the host
   * leaves them out of the handler's `state` (a get answers absent, a list omits them), in process
   * and out of process alike, so an invocation over a transport never carries them. */
  ignore?: IgnoreDecl[];
}

/** Objects of one kind a handler's `state` leaves out (WatchTrigger.ignore); `when` is pure. */
export interface IgnoreDecl {
  resource: Resource;
  when: (o: KubeObject, key: string) => boolean;
  /** The keys whose handler may read `o`: exactly those for which `when(o, key)` is false ([] when
   * it is ignored for every key); pure, from the object alone. A host that indexes its cache by it
   * (the relay) lists only these objects for a key instead of every cached object of the kind, so
   * an invocation's cost does not grow with the objects it ignores (issue 17). */
  readBy?: (o: KubeObject) => string[];
}

/** An object read by name. */
export interface ObjectRef {
  resource: Resource;
  namespace?: string;
  name: string;
}

export interface FetchDecl {
  /** The fetched kinds: `state` answers them only from this invocation's GETs (never a cache). */
  resources: Resource[];
  /** The objects one invocation reads (computed from the cached state before the handler runs). */
  refs: (input: { key: string; object: KubeObject | undefined; state: State }) => ObjectRef[];
}

export interface CronTrigger {
  type: 'cron';
  /** Standard 5-field cron schedule of the CronJob. */
  schedule: string;
  /** What the handler lists (read once per invocation), optionally narrowed to a namespace or labels. */
  reads: Read[];
}

export interface Read {
  resource: Resource;
  namespace?: string;
  labelSelector?: string;
  /** Read exactly this object with a GET (absent when it does not exist) instead of listing:
   * the function's role can then be limited by resourceNames. */
  name?: string;
}

/** An RBAC rule the function needs; the host's role is generated from its functions' rules. */
/** scope 'namespace' grants the rule only in the kruntimes namespace (a Role), otherwise cluster-wide. */
export interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
  scope?: 'cluster' | 'namespace';
}

export interface AdmissionTrigger {
  type: 'admission';
  /** validating or mutating webhook. */
  webhook: 'validating' | 'mutating';
  rules: {
    apiGroups: string[];
    apiVersions: string[];
    resources: string[];
    operations: ('CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT')[];
    scope?: 'Namespaced' | 'Cluster' | '*';
  }[];
  timeoutSeconds: number;
  failurePolicy: 'Fail' | 'Ignore';
  /** The webhook's sideEffects: None (the default), or NoneOnDryRun for a handler that writes (e.g. Events) except on a dry run. */
  sideEffects?: 'None' | 'NoneOnDryRun';
  /** Only objects with these labels are sent to the webhook. */
  objectSelector?: { matchLabels: Record<string, string> };
  /** CEL match conditions evaluated by the API server before calling (e.g. has(object.spec.workspace)). */
  matchConditions?: { name: string; expression: string }[];
}

export type Trigger = WatchTrigger | CronTrigger | AdmissionTrigger;

/** Read access to the observed state (informer caches in the relay, a fresh list in cron). */
export interface State {
  get(resource: Resource, namespace: string | undefined, name: string): KubeObject | undefined;
  list(resource: Resource, namespace?: string, labelSelector?: Record<string, string>): KubeObject[];
  /** The objects of `resource` that `by` (an IgnoreDecl.readBy) maps to `value`, from the host's index;
   * undefined when the host keeps no such index (the caller then lists). */
  indexed?(resource: Resource, by: (o: KubeObject) => string[], value: string): KubeObject[] | undefined;
}

export type Operation =
  /** Server-side apply with the function's name as field manager. */
  | { op: 'apply'; resource: Resource; object: KubeObject; subresource?: 'status' }
  /** Create; AlreadyExists counts as done (deterministic names make creates idempotent). */
  | { op: 'create'; resource: Resource; object: KubeObject }
  | {
      op: 'patch';
      resource: Resource;
      namespace?: string;
      name: string;
      patch: unknown;
      patchType?: 'merge' | 'json';
      subresource?: 'status';
    }
  /** Full status write guarded by the object's resourceVersion (optimistic concurrency). */
  | { op: 'status'; resource: Resource; object: KubeObject & { status: unknown } }
  | { op: 'delete'; resource: Resource; namespace?: string; name: string; uid?: string }
  | DeleteRunArtifactsOp
  | { op: 'requeue'; afterMs: number };

/**
 * Deletes everything stored for one Run (`[<prefix>/]namespaces/<namespace>/runs/<runUID>/`) from
 * an S3 store, with the store credentials in `credentials` (a Secret the function's own
 * ServiceAccount reads; never its content in the operation). Idempotent: nothing there is success.
 * A failure is transient (retried with backoff; the operations after it are not applied, so a
 * finalizer released after it stays); an underivable key is terminal (lib/fn/artifacts.ts).
 */
export interface DeleteRunArtifactsOp {
  op: 'deleteRunArtifacts';
  store: { bucket: string; prefix?: string; endpoint?: string; region?: string; forcePathStyle?: boolean };
  namespace: string;
  runUID: string;
  credentials: { namespace: string; name: string };
}

export interface ReconcileInput {
  /** namespace/name (or name) of the object the invocation is for. */
  key: string;
  /** The observed object; undefined when it no longer exists. */
  object: KubeObject | undefined;
  state: State;
  now: Date;
}

export interface CronInput {
  state: State;
  now: Date;
}

export interface AdmissionRequest {
  uid: string;
  kind: { group: string; version: string; kind: string };
  resource: { group: string; version: string; resource: string };
  subResource?: string;
  name?: string;
  namespace?: string;
  operation: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  userInfo: { username: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  object?: KubeObject;
  oldObject?: KubeObject;
  dryRun?: boolean;
}

export interface AdmissionResult {
  allowed: boolean;
  message?: string;
  reason?: string;
  code?: number;
  warnings?: string[];
  patch?: unknown[];
}

/** What the admission handler may use: the request, the time, and bounded API reads (e.g. SubjectAccessReview). */
export interface AdmissionContext {
  now: Date;
  signal: AbortSignal;
  /** POST to the API server (e.g. authorization.k8s.io SubjectAccessReviews). */
  post<T>(path: string, body: unknown): Promise<T>;
  get<T extends KubeObject>(path: string): Promise<T | undefined>;
  /**
   * An object from the watch relay's informer cache when this process runs the relay and holds
   * it (undefined otherwise: read it with `get`). It may lag the API server by a watch delivery,
   * like the informers Kubernetes' own admission plugins read.
   */
  cached?(resource: Resource, namespace: string | undefined, name: string): KubeObject | undefined;
}

interface Common {
  name: string;
  description: string;
  rbac: Rule[];
}
/**
 * A Prometheus gauge a watch function derives from the observed state (its informer caches) at
 * every scrape of /metrics: level-style signals (e.g. "several global default JobClasses") that an
 * alert can hold on for as long as they last, unlike one-off Events.
 */
export interface StateGauge {
  name: string;
  help: string;
  labelNames?: string[];
  collect: (state: State) => { labels?: Record<string, string>; value: number }[];
}

export type FunctionDef =
  | (Common & {
      trigger: WatchTrigger;
      concurrency?: number;
      gauges?: StateGauge[];
      handler: (input: ReconcileInput) => Operation[] | Promise<Operation[]>;
    })
  | (Common & { trigger: CronTrigger; handler: (input: CronInput) => Operation[] | Promise<Operation[]> })
  | (Common & {
      trigger: AdmissionTrigger;
      handler: (req: AdmissionRequest, ctx: AdmissionContext) => AdmissionResult | Promise<AdmissionResult>;
    });

export type WatchFunction = Extract<FunctionDef, { trigger: WatchTrigger }>;
export type CronFunction = Extract<FunctionDef, { trigger: CronTrigger }>;
export type AdmissionFunction = Extract<FunctionDef, { trigger: AdmissionTrigger }>;

export function resourcePath(r: Resource, namespace?: string, name?: string, subresource?: string): string {
  const base = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
  const ns = r.namespaced && namespace ? `/namespaces/${namespace}` : '';
  return `${base}${ns}/${r.resource}${name ? `/${name}` : ''}${subresource ? `/${subresource}` : ''}`;
}

export function keyOf(o: KubeObject): string {
  return o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name ?? ''}` : (o.metadata.name ?? '');
}

export function splitKey(key: string): { namespace?: string; name: string } {
  const i = key.indexOf('/');
  return i < 0 ? { name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

export function apiVersionOf(r: Resource): string {
  return r.group ? `${r.group}/${r.version}` : r.version;
}
