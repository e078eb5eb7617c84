import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';

export interface Pki {
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

/** A certificate authority, a server certificate for 127.0.0.1 and a client certificate, made with openssl in `dir`. */
export function makePki(dir: string): Pki {
  const at = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=tablefate test CA',
    '-keyout',
    at('ca.key'),
    '-out',
    at('ca.pem'),
  );
  for (const [who, extra] of [
    ['server', 'subjectAltName=IP:127.0.0.1,DNS:localhost'],
    ['client', 'extendedKeyUsage=clientAuth'],
  ] as const) {
    openssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      `/CN=tablefate test ${who}`,
      '-keyout',
      at(`${who}.key`),
      '-out',
      at(`${who}.csr`),
    );
    fs.writeFileSync(at(`${who}.ext`), `${extra}\n`);
    openssl(
      'x509',
      '-req',
      '-in',
      at(`${who}.csr`),
      '-CA',
      at('ca.pem'),
      '-CAkey',
      at('ca.key'),
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      at(`${who}.ext`),
      '-out',
      at(`${who}.pem`),
    );
  }
  return {
    ca: at('ca.pem'),
    serverCert: at('server.pem'),
    serverKey: at('server.key'),
    clientCert: at('client.pem'),
    clientKey: at('client.key'),
  };
}

/**
 * A TLS front for a plain Temporal server (the dev server speaks no TLS), as a load balancer of a secured cluster
 * would be: it requires a client certificate signed by the CA, speaks HTTP/2 (gRPC), and passes the bytes on.
 */
export async function startTlsProxy(pki: Pki, target: string): Promise<{ address: string; stop(): Promise<void> }> {
  const [host, port] = target.split(':') as [string, string];
  const server = tls.createServer(
    {
      key: fs.readFileSync(pki.serverKey),
      cert: fs.readFileSync(pki.serverCert),
      ca: fs.readFileSync(pki.ca),
      requestCert: true,
      rejectUnauthorized: true,
      ALPNProtocols: ['h2'],
    },
    (socket) => {
      const upstream = net.connect(Number(port), host);
      socket.pipe(upstream).pipe(socket);
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
    },
  );
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port: listening } = server.address() as net.AddressInfo;
  return {
    address: `127.0.0.1:${listening}`,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
