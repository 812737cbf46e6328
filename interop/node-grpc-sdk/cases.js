'use strict';
// Self-checking cases of the RocketMQ 5 gRPC SDK for Node.js (npm
// rocketmq-client-nodejs, pinned in package-lock.json) against one Basalt
// broker's gRPC MessagingService:
//
//   node cases.js --endpoint 127.0.0.1:8081 [--tls] CASE...
//
// Each case owns topic node-CASE and consumer group ng-CASE (the test
// creates the topics). Every case prints what it sent (SENT) and received
// (RECV), counts exactly (COUNT) and fails unless each message arrived
// exactly once and, where the case says so, in order or at the right time.
// The last line is ALL PASSED, or FAILED naming the failed cases, with exit
// status 1.
//
// Without --tls the clients keep the SDK's default, sslEnabled false (plain
// text, h2c). With --tls they set sslEnabled true; the SDK then dials with
// grpc-js's createSsl(), which verifies the server's certificate against
// the roots in $GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: this harness first reads
// the broker's (self-signed) certificate off a TLS handshake and names it
// there, so the verification (chain and the 127.0.0.1 address) really runs.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const tls = require('node:tls');
const lib = require('./lib');

const cases = { ...require('./publish'), ...require('./consume') };

function usage() {
  console.error('usage: node cases.js --endpoint HOST:PORT [--tls] CASE...');
  process.exit(2);
}

// The command line: options into lib.opts, the case names returned.
function parseArgs(argv) {
  const names = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--endpoint') {
      if (i + 1 >= argv.length) usage();
      lib.opts.endpoint = argv[++i];
    } else if (argv[i] === '--tls') {
      lib.opts.tls = true;
    } else if (argv[i].startsWith('-')) {
      usage();
    } else {
      names.push(argv[i]);
    }
  }
  if (names.length === 0) usage();
  return names;
}

// Reads the certificate the broker presents at endpoint (without verifying
// it) and writes it, PEM, into a file that grpc-js takes as its trusted
// roots. Must run before the SDK (so grpc-js) is loaded.
async function trustServerCertificate(endpoint) {
  const at = endpoint.lastIndexOf(':');
  const host = endpoint.slice(0, at);
  const port = Number(endpoint.slice(at + 1));
  const cert = await new Promise((resolve, reject) => {
    const s = tls.connect({ host, port, rejectUnauthorized: false, ALPNProtocols: [ 'h2' ] }, () => {
      const c = s.getPeerCertificate();
      console.log(`TLS handshake with ${endpoint}: ${s.getProtocol()} alpn=${s.alpnProtocol} ` +
        `subject=${JSON.stringify(c.subject)} san=${c.subjectaltname}`);
      s.end();
      resolve(c.raw);
    });
    s.once('error', reject);
  });
  const b64 = cert.toString('base64').match(/.{1,64}/g).join('\n');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'node-grpc-sdk-'));
  const file = path.join(dir, 'server.pem');
  fs.writeFileSync(file, `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`);
  process.env.GRPC_DEFAULT_SSL_ROOTS_FILE_PATH = file;
}

// An exception thrown in one of the SDK's own callbacks (e.g. its handler
// of the broker's settings on the Telemetry stream) reaches no case: end
// the run with it, and where it was thrown.
function onUncaught(e) {
  const where = e instanceof Error && e.stack ? e.stack.split('\n').slice(1, 6).join('\n') : '';
  console.log(`uncaught in the SDK: ${lib.why(e)}\n${where}`);
  console.log(`FAILED: uncaught ${lib.why(e)}`);
  process.exit(1);
}

async function main() {
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUncaught);
  const names = parseArgs(process.argv.slice(2));
  if (lib.opts.tls) {
    await trustServerCertificate(lib.opts.endpoint);
  }
  const failed = [];
  for (const name of names) {
    const run = cases[name];
    if (!run) {
      console.log(`CASE ${name} FAILED: unknown case`);
      failed.push(name);
      continue;
    }
    const start = Date.now();
    try {
      await run();
      console.log(`CASE ${name} PASSED in ${Date.now() - start} ms`);
    } catch (e) {
      console.log(`CASE ${name} FAILED: ${e instanceof Error && !e.code ? e.message : lib.why(e)}`);
      failed.push(name);
    }
  }
  if (failed.length > 0) {
    console.log(`FAILED: [${failed.join(' ')}]`);
    process.exit(1);
  }
  console.log('ALL PASSED');
  // The SDK may leave a reconnect timer behind after shutdown: do not wait.
  process.exit(0);
}

main().catch(e => {
  console.log(`FAILED: ${lib.why(e)}`);
  process.exit(1);
});
