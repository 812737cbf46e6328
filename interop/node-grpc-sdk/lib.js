'use strict';
// Helpers of the Node.js SDK cases (cases.js): clients, sends that print
// their receipt, and receives that count exactly.
//
// The SDK is required lazily (sdk()): with --tls, cases.js first points
// @grpc/grpc-js at the server's certificate, which grpc-js reads once, when
// it is loaded.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const util = require('node:util');

const opts = {
  // The broker's gRPC address, host:port.
  endpoint: '127.0.0.1:8081',
  // sslEnabled of every client; the SDK's default is false (plain text).
  tls: false,
};

let loaded;

// The SDK and its protobuf enums.
function sdk() {
  if (!loaded) {
    const client = require('rocketmq-client-nodejs');
    const pb = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');
    loaded = { client, pb };
  }
  return loaded;
}

// The invisible time of the receives that ack at once.
const RECEIVE_INVISIBLE_MS = 20000;
// The long-polling time of every receive (the SDK's default is 30 s).
const AWAIT_MS = 5000;

// The SDK's log, where its default logger writes it
// ($HOME/logs/rocketmq/rocketmq_client_nodejs.log), but appended
// synchronously: the default (egg-logger) buffers, loses what is buffered
// at process.exit, and, shared by the clients of one process, fails every
// write to stderr once the first client's shutdown closed it.
const logFile = path.join(os.homedir(), 'logs', 'rocketmq', 'rocketmq_client_nodejs.log');
let logReady = false;

function logLine(level, args) {
  try {
    if (!logReady) {
      fs.mkdirSync(path.dirname(logFile), { recursive: true });
      logReady = true;
    }
    fs.appendFileSync(logFile, `${new Date().toISOString()} ${level} ${util.format(...args)}\n`);
  } catch (e) {
    // A log that cannot be written is no reason to fail a case.
  }
}

const logger = {
  info: (...a) => logLine('INFO', a),
  warn: (...a) => logLine('WARN', a),
  error: (...a) => logLine('ERROR', a),
  debug: () => {},
  close: () => {},
};

// Options every client shares. No sessionCredentials: Basalt without ACL
// checks none, and the SDK signs nothing without them.
function base() {
  const o = { endpoints: opts.endpoint, namespace: '', logger };
  if (opts.tls) {
    o.sslEnabled = true;
  }
  return o;
}

// A started producer of topic (with a transaction checker when given).
async function producer(topic, checker) {
  const { Producer } = sdk().client;
  const o = { ...base(), topic };
  if (checker) {
    o.checker = checker;
  }
  const p = new Producer(o);
  await p.startup();
  return p;
}

// A started SimpleConsumer of group subscribed to topic with filter (every
// tag when not given).
async function consumer(group, topic, filter) {
  const { SimpleConsumer, FilterExpression } = sdk().client;
  const c = new SimpleConsumer({
    ...base(),
    consumerGroup: group,
    subscriptions: new Map([[ topic, filter || FilterExpression.SUB_ALL ]]),
    awaitDuration: AWAIT_MS,
  });
  await c.startup();
  return c;
}

// Shuts clients down, reporting (not failing on) an error.
async function stop(...clients) {
  for (const c of clients) {
    if (!c) continue;
    try {
      await c.shutdown();
    } catch (e) {
      console.log(`STOP ${c.constructor.name}: ${why(e)}`);
    }
  }
}

// A message of topic with a tag, keys and user properties.
function message(topic, body, tag, keys, props) {
  const m = { topic, body: Buffer.from(body) };
  if (tag) m.tag = tag;
  if (keys && keys.length) m.keys = keys;
  if (props) m.properties = new Map(Object.entries(props));
  return m;
}

// A body for printing: at most 64 bytes of it.
function short(body) {
  if (body.length > 64) {
    return `${JSON.stringify(body.subarray(0, 64).toString())}... (${body.length} bytes)`;
  }
  return body.toString();
}

// An error for printing, with the SDK's response code when it has one.
function why(e) {
  if (!(e instanceof Error)) return String(e);
  const code = e.code !== undefined ? ` (code ${e.code})` : '';
  return `${e.name}: ${e.message}${code}`;
}

// Sends m (in transaction tx when given) and prints its receipt.
async function send(label, p, m, tx) {
  let receipt;
  try {
    receipt = await p.send(m, tx);
  } catch (e) {
    throw new Error(`${label}: send ${short(m.body)}: ${why(e)}`);
  }
  const half = tx ? ` (half, transaction ${receipt.transactionId})` : '';
  console.log(`SENT ${label} id=${receipt.messageId} body=${short(m.body)}${half}`);
  return receipt;
}

// One receive of at most max messages; an empty one is [].
async function receive(c, max, invisibleMs) {
  return c.receive(max, invisibleMs === undefined ? RECEIVE_INVISIBLE_MS : invisibleMs);
}

// What a case keeps of a received message.
function describe(m) {
  return {
    id: m.messageId,
    body: m.body.toString(),
    tag: m.tag || '',
    keys: m.keys,
    props: m.properties,
    group: m.messageGroup || '',
    attempt: m.deliveryAttempt,
    born: m.bornTimestamp,
    due: m.deliveryTimestamp,
    corrupted: m.corrupted === true,
    at: new Date(),
  };
}

function sleep(ms) {
  return new Promise(resolve => setTimeout(resolve, ms));
}

// Receives and acks until expected messages came (or deadlineMs passed),
// then makes sure nothing more comes for settleMs. Returns them in arrival
// order; fails on a duplicate message id, a failed receive or ack, or a
// count other than expected.
async function receiveExactly(label, c, expected, deadlineMs, settleMs) {
  const got = [];
  const ids = new Set();
  const end = Date.now() + deadlineMs;
  while (got.length < expected && Date.now() < end) {
    for (const m of await receive(c, 16)) {
      const r = describe(m);
      console.log(`RECV ${label} id=${r.id} body=${r.body} tag=${r.tag} group=${r.group} ` +
        `attempt=${r.attempt}`);
      if (ids.has(r.id)) throw new Error(`${label}: duplicate message ${r.id}`);
      ids.add(r.id);
      got.push(r);
      try {
        await c.ack(m);
      } catch (e) {
        throw new Error(`${label}: ack ${r.id}: ${why(e)}`);
      }
    }
  }
  await settle(label, c, expected, settleMs);
  console.log(`COUNT ${label} received=${got.length} expected=${expected}`);
  if (got.length !== expected) {
    throw new Error(`${label}: received ${got.length} of ${expected}`);
  }
  return got;
}

// Fails if any message comes within ms (acking what does).
async function settle(label, c, expected, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const views = await receive(c, 16);
    for (const m of views) {
      console.log(`RECV ${label} EXTRA id=${m.messageId} body=${m.body} attempt=${m.deliveryAttempt}`);
      await c.ack(m).catch(() => {});
    }
    if (views.length > 0) {
      throw new Error(`${label}: received more than the ${expected} messages expected`);
    }
  }
}

// Receives until one message comes (at most deadlineMs), one at a time.
async function receiveOne(c, invisibleMs, deadlineMs) {
  const end = Date.now() + deadlineMs;
  while (Date.now() < end) {
    const views = await receive(c, 1, invisibleMs);
    if (views.length > 1) throw new Error(`asked for one message, got ${views.length}`);
    if (views.length === 1) return views[0];
  }
  throw new Error(`no message within ${deadlineMs} ms`);
}

// Fails unless got holds exactly the bodies sent (any order).
function sameBodies(label, sent, got) {
  const want = [ ...sent ].sort();
  const bodies = got.map(r => r.body).sort();
  if (want.join('\n') !== bodies.join('\n')) {
    throw new Error(`${label}: sent [${want}], received [${bodies}]`);
  }
}

module.exports = {
  opts, sdk, producer, consumer, stop, message, short, why, send, receive,
  describe, sleep, receiveExactly, settle, receiveOne, sameBodies,
  RECEIVE_INVISIBLE_MS,
};
