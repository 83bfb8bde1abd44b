/** The bash Runtime the benchmarks run on (the project's bash-runtime image). */
export function benchRuntime(
  name: string,
  replicas: number,
  slots: number,
  labels: Record<string, string> = {},
): Record<string, unknown> {
  return {
    apiVersion: 'kruntimes.io/v1alpha1',
    kind: 'Runtime',
    metadata: { name, labels },
    spec: {
      replicas,
      capacity: { resources: { runs: String(slots) } },
      template: {
        spec: {
          containers: [
            {
              name: 'runtime',
              image: 'ghcr.io/kruntimes/bash-runtime:v0.0.3',
              args: ['--port=9091', '--work-dir=/workspace'],
            },
          ],
        },
      },
    },
  };
}
