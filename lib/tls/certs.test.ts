import assert from 'node:assert/strict';
import { createPrivateKey, generateKeyPairSync, sign, X509Certificate } from 'node:crypto';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { createCa, issueServing, notAfter, splitBundle, type KeyPairPem } from './certs.ts';
import { bits, boolean, children, explicit, namedBits, octets, oid, read, sequence, set, time, tlv } from './der.ts';

const now = new Date('2026-12-02T08:00:00Z');

/** An HTTPS request to a server with this serving pair, trusting only caPem; resolves with the body. */
async function handshake(pair: KeyPairPem, caPem: string, host: string): Promise<string> {
  const srv = https.createServer({ cert: pair.cert, key: pair.key }, (_req, res) => res.end('hello'));
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  try {
    const port = (srv.address() as AddressInfo).port;
    return await new Promise((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port, ca: caPem, servername: host, agent: false }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve(body));
      });
      req.on('error', reject);
      req.end();
    });
  } finally {
    srv.close();
  }
}

/** The Name elements of a certificate: [issuer, subject], as encoded. */
function names(pem: string): [Buffer, Buffer] {
  const der = new X509Certificate(pem).raw;
  const tbs = children(der, children(der, read(der))[0]!);
  return [tbs[3]!.whole, tbs[5]!.whole];
}

/** A CA whose name is a PrintableString, as certificates issued before this module were (@peculiar/x509). */
function printableStringCa(cn: string): KeyPairPem {
  const keys = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const name = sequence(set(sequence(oid('2.5.4.3'), tlv(0x13, Buffer.from(cn, 'ascii')))));
  const alg = sequence(oid('1.2.840.10045.4.3.2'));
  const ext = (id: string, v: Buffer): Buffer => sequence(oid(id), boolean(true), octets(v));
  const tbs = sequence(
    explicit(0, tlv(0x02, Buffer.from([2]))),
    tlv(0x02, Buffer.from([0x12, 0x34])),
    alg,
    name,
    sequence(time(new Date(now.getTime() - 60_000)), time(new Date(now.getTime() + 3650 * 86_400_000))),
    name,
    keys.publicKey.export({ type: 'spki', format: 'der' }),
    explicit(3, sequence(ext('2.5.29.19', sequence(boolean(true))), ext('2.5.29.15', namedBits([5, 6])))),
  );
  const der = sequence(tbs, alg, bits(sign('sha256', tbs, { key: keys.privateKey, dsaEncoding: 'der' })));
  const cert = `-----BEGIN CERTIFICATE-----\n${der.toString('base64')}\n-----END CERTIFICATE-----`;
  return { cert, key: keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

describe('lib/tls/certs: X.509 with node:crypto (issue 17)', () => {
  it('creates a self-signed CA: CA:TRUE, keyCertSign, its validity', async () => {
    const ca = await createCa('kruntimes-test-ca', now, 3650);
    const c = new X509Certificate(ca.cert);
    assert.equal(c.subject, 'CN=kruntimes-test-ca');
    assert.equal(c.issuer, 'CN=kruntimes-test-ca');
    assert.equal(c.ca, true);
    assert.equal(c.checkIssued(c), true);
    assert.equal(c.verify(c.publicKey), true);
    assert.equal(c.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1');
    assert.equal(notAfter(ca.cert).toISOString(), new Date(now.getTime() + 3650 * 86_400_000).toISOString());
    assert.equal(new Date(c.validFrom).getTime(), now.getTime() - 60_000);
    assert.match(ca.key, /^-----BEGIN PRIVATE KEY-----\n/);
  });

  it('issues a serving certificate a TLS client accepts by DNS name and by IP, trusting only the CA', async () => {
    const ca = await createCa('kruntimes-test-ca', new Date(), 10);
    const pair = await issueServing(
      ca,
      'svc',
      { dns: ['svc.ns.svc', 'localhost'], ips: ['127.0.0.1', 'fd00::1:2'] },
      new Date(),
      1,
    );
    const c = new X509Certificate(pair.cert);
    assert.equal(c.ca, false);
    assert.equal(c.subject, 'CN=svc');
    assert.equal(c.issuer, 'CN=kruntimes-test-ca');
    assert.equal(
      c.subjectAltName,
      'DNS:svc.ns.svc, DNS:localhost, IP Address:127.0.0.1, IP Address:FD00:0:0:0:0:0:1:2',
    );
    assert.deepEqual(c.keyUsage, ['1.3.6.1.5.5.7.3.1']);
    assert.equal(c.checkIssued(new X509Certificate(ca.cert)), true);
    assert.equal(c.verify(new X509Certificate(ca.cert).publicKey), true);
    assert.equal(c.checkPrivateKey(createPrivateKey(pair.key)), true);
    assert.equal(await handshake(pair, ca.cert, 'svc.ns.svc'), 'hello');
    const other = await createCa('kruntimes-test-ca', new Date(), 10);
    await assert.rejects(handshake(pair, other.cert, 'svc.ns.svc'), /signature|unable to verify|self.signed/i);
    await assert.rejects(handshake(pair, ca.cert, 'elsewhere.ns.svc'), /altnames|Hostname/i);
  });

  it('names an existing CA as issuer byte for byte (a CA issued before, with a PrintableString name)', async () => {
    const ca = printableStringCa('kruntimes-extension-ca');
    const pair = await issueServing(
      ca,
      'kruntimes-extension.kruntimes-system.svc',
      { dns: ['localhost'], ips: [] },
      new Date(),
      1,
    );
    assert.deepEqual(names(pair.cert)[0], names(ca.cert)[1]);
    assert.equal(await handshake(pair, ca.cert, 'localhost'), 'hello');
  });

  it('encodes serial numbers as minimal positive INTEGERs and splits bundles in order', async () => {
    const ca = await createCa('c', now, 1);
    for (let i = 0; i < 50; i++) {
      const der = new X509Certificate((await issueServing(ca, 'l', { dns: ['l'], ips: [] }, now, 1)).cert).raw;
      const serial = children(der, children(der, read(der))[0]!)[1]!;
      const first = der[serial.start]!;
      assert.ok(first > 0 && first < 0x80, `serial starts with ${first}`);
    }
    const two = await createCa('d', now, 1);
    assert.deepEqual(splitBundle(`${ca.cert}\n${two.cert}\n`), [ca.cert, two.cert]);
  });

  it('refuses a SAN IP that is not an address', async () => {
    const ca = await createCa('c', now, 1);
    await assert.rejects(async () => issueServing(ca, 'l', { dns: [], ips: ['10.0.0'] }, now, 1), /not an IP address/);
  });
});
