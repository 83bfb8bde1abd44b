/** A real S3-compatible server for tests: versitygw over a temporary POSIX directory on 127.0.0.1. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort } from '../localenv/ports.ts';

export interface S3Server {
  endpoint: string;
  accessKey: string;
  secretKey: string;
  client: S3Client;
  dir: string;
  stop(): void;
}

export async function startS3Server(bucket: string): Promise<S3Server> {
  const bin = process.env.KRT_S3_BIN;
  if (!bin)
    throw new Error(
      'KRT_S3_BIN is not set: run the suite through scripts/test.sh or scripts/e2e-one.sh (they build versitygw)',
    );
  const dir = mkdtempSync(join(tmpdir(), 'krt-s3-'));
  mkdirSync(join(dir, 'meta'));
  const port = await freePort();
  const accessKey = 'kruntimes-test';
  const secretKey = `secret-${process.pid}-${Date.now()}`;
  const child: ChildProcess = spawn(
    bin,
    [
      '--access',
      accessKey,
      '--secret',
      secretKey,
      '--port',
      `127.0.0.1:${port}`,
      'posix',
      '--sidecar',
      join(dir, 'meta'),
      join(dir, 'data'),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  mkdirSync(join(dir, 'data'));
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: accessKey, secretAccessKey: secretKey },
  });
  for (let i = 0; ; i++) {
    try {
      await client.send(new CreateBucketCommand({ Bucket: bucket }));
      break;
    } catch (err) {
      if (i > 100) throw new Error(`S3 server did not start: ${String(err)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    endpoint,
    accessKey,
    secretKey,
    client,
    dir,
    stop: () => {
      child.kill('SIGTERM');
      client.destroy();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
