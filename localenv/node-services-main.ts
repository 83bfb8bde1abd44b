/** Entry point of the kubelet node kind's node-services process (see node-services.ts). */
import { startNodeServices } from './node-services.ts';

const path = process.argv[2];
if (!path) {
  process.stderr.write('usage: node-services <config.json>\n');
  process.exit(2);
}
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
startNodeServices(path).catch((err: unknown) => {
  process.stderr.write(`node-services failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
