/** metav1.Status responses of the aggregated APIs. */
import type { Response } from 'express';

export function status(res: Response, code: number, reason: string, message: string): void {
  res.status(code).json({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code });
}
