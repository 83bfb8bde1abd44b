/** metav1.Condition helpers: lastTransitionTime changes only when status flips. */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export function setCondition(
  list: Condition[] | undefined,
  c: Omit<Condition, 'lastTransitionTime'>,
  now: string,
): Condition[] {
  const out = [...(list ?? [])];
  const i = out.findIndex((x) => x.type === c.type);
  const prev = i >= 0 ? out[i] : undefined;
  const next: Condition = {
    ...c,
    lastTransitionTime: prev && prev.status === c.status ? prev.lastTransitionTime : now,
  };
  if (i >= 0) out[i] = next;
  else out.push(next);
  return out;
}

export function getCondition(list: Condition[] | undefined, type: string): Condition | undefined {
  return list?.find((c) => c.type === type);
}
