/** metav1.LabelSelector matching and validation (apimachinery LabelSelectorAsSelector semantics). */
/** metav1.LabelSelector (structurally; the generated CRD types are assignable to it). */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

type Expression = NonNullable<LabelSelector['matchExpressions']>[number];

const NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function has(labels: Record<string, string>, key: string): boolean {
  return Object.hasOwn(labels, key);
}

function matchesExpression(expr: Expression, labels: Record<string, string>): boolean {
  const present = has(labels, expr.key);
  const values = expr.values ?? [];
  switch (expr.operator) {
    case 'In':
      return present && values.includes(labels[expr.key] ?? '');
    case 'NotIn':
      return !present || !values.includes(labels[expr.key] ?? '');
    case 'Exists':
      return present;
    case 'DoesNotExist':
      return !present;
    default:
      return false;
  }
}

/**
 * Whether labels satisfy the selector: every matchLabels pair is present with that value and
 * every matchExpressions requirement holds (In: present with a listed value; NotIn: absent or
 * not a listed value; Exists; DoesNotExist). An empty selector matches everything, as in
 * Kubernetes; an absent selector matches nothing. Validate with validateSelector first.
 */
export function matchesSelector(selector: LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return false;
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (!has(labels, key) || labels[key] !== value) return false;
  }
  return (selector.matchExpressions ?? []).every((expr) => matchesExpression(expr, labels));
}

/** Kubernetes qualified-name check for label keys; returns a problem or undefined. */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix === '' || prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) {
    return `label key ${JSON.stringify(key)}: prefix must be a DNS subdomain`;
  }
  if (name.length === 0 || name.length > 63 || !NAME.test(name)) {
    return `label key ${JSON.stringify(key)}: name part must be 1-63 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character`;
  }
  return undefined;
}

export function labelValueProblem(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length > 63 || !VALUE.test(value)) {
    return `label value ${JSON.stringify(value)}: must be at most 63 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character`;
  }
  return undefined;
}

function expressionProblem(expr: Expression): string | undefined {
  const values = expr.values ?? [];
  const keyProblem = labelKeyProblem(expr.key);
  if (keyProblem) return keyProblem;
  switch (expr.operator) {
    case 'In':
    case 'NotIn':
      if (values.length === 0)
        return `for 'In', 'NotIn' operators, values set can't be empty (key ${JSON.stringify(expr.key)})`;
      break;
    case 'Exists':
    case 'DoesNotExist':
      if (values.length !== 0)
        return `for 'Exists', 'DoesNotExist' operators, values set must be empty (key ${JSON.stringify(expr.key)})`;
      break;
    default:
      return `${JSON.stringify(expr.operator)} is not a valid label selector operator`;
  }
  return values.map(labelValueProblem).find((p) => p !== undefined);
}

/**
 * Returns why the selector cannot be compiled (what apimachinery LabelSelectorAsSelector would
 * reject: bad label keys or values, unknown operators, value sets inconsistent with the
 * operator), or undefined when it is valid.
 */
export function validateSelector(selector: LabelSelector | undefined): string | undefined {
  if (!selector || typeof selector !== 'object') return 'run affinity term has no label selector';
  const keys = Object.keys(selector.matchLabels ?? {}).sort();
  for (const key of keys) {
    const problem = labelKeyProblem(key) ?? labelValueProblem(selector.matchLabels?.[key] ?? '');
    if (problem) return problem;
  }
  for (const expr of selector.matchExpressions ?? []) {
    const problem = expressionProblem(expr);
    if (problem) return problem;
  }
  return undefined;
}
