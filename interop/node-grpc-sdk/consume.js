'use strict';
// Cases of how a SimpleConsumer receives: every queue read, orderly groups,
// invisible time, changing it, and acks with a stale receipt handle.

const {
  sdk, producer, consumer, stop, message, why, send, receive, receiveExactly,
  receiveOne,
} = require('./lib');

// any-queue: a receive right after start is empty, without error; then
// eight times, one message is sent and one receive must return it. The SDK
// names one queue of the route in each receive while the broker put the
// message on any of the topic's four: a receive has to read every queue.
async function caseAnyQueue() {
  const t = 'node-any-queue';
  let p;
  let c;
  try {
    p = await producer(t);
    c = await consumer('ng-any-queue', t);
    const first = await receive(c, 16);
    console.log(`RECV any-queue right after start: ${first.length} messages`);
    if (first.length !== 0) throw new Error(`any-queue: ${first.length} messages before any was sent`);
    for (let i = 0; i < 8; i++) {
      const b = `any-queue-${i}`;
      await send('any-queue', p, message(t, b, 'q'));
      const bodies = [];
      for (const m of await receive(c, 16)) {
        bodies.push(m.body.toString());
        await c.ack(m);
      }
      console.log(`RECV any-queue one receive after sending ${b}: [${bodies}]`);
      if (bodies.length !== 1 || bodies[0] !== b) {
        throw new Error(`any-queue: one receive after sending ${b} returned [${bodies}]`);
      }
    }
  } finally {
    await stop(p, c);
  }
}

// orderly: the group ng-orderly is orderly (the test creates it with
// consumeMessageOrderly); three messages of one message group. While the
// first is received and not acked, a receive gets nothing of the group;
// after its ack the rest come, in order, each once.
async function caseOrderly() {
  const t = 'node-orderly';
  let p;
  let c;
  try {
    p = await producer(t);
    c = await consumer('ng-orderly', t);
    const want = [ 'ga:0', 'ga:1', 'ga:2' ];
    for (const b of want) {
      await send('orderly', p, { ...message(t, b, 'o'), messageGroup: 'ga' });
    }
    const first = await receiveOne(c, 20000, 30000);
    console.log(`RECV orderly id=${first.messageId} body=${first.body} attempt=${first.deliveryAttempt} ` +
      '(not acked yet)');
    if (first.body.toString() !== want[0]) throw new Error(`orderly: first came ${first.body}`);
    const held = await receive(c, 16);
    for (const m of held) console.log(`RECV orderly WHILE HELD id=${m.messageId} body=${m.body}`);
    if (held.length !== 0) {
      throw new Error(`orderly: ${held.length} messages of the group came while the first was not acked`);
    }
    await c.ack(first);
    const rest = await receiveExactly('orderly', c, 2, 60000, 6000);
    const got = [ first.body.toString(), ...rest.map(r => r.body) ].join(',');
    console.log(`ORDER orderly got=[${got}]`);
    if (got !== want.join(',')) throw new Error(`orderly: out of order: [${got}]`);
  } finally {
    await stop(p, c);
  }
}

// invisible: a message not acked comes back after its 10 s invisible time
// with delivery attempt 2, and not again once acked.
async function caseInvisible() {
  const t = 'node-invisible';
  let p;
  let c;
  try {
    p = await producer(t);
    c = await consumer('ng-invisible', t);
    await send('invisible', p, message(t, 'invisible-1', 'i', [ 'k' ]));
    const first = await receiveOne(c, 10000, 30000);
    const at = Date.now();
    console.log(`RECV invisible id=${first.messageId} body=${first.body} attempt=${first.deliveryAttempt} ` +
      '(not acked)');
    if (first.deliveryAttempt !== 1) {
      throw new Error(`invisible: first delivery attempt is ${first.deliveryAttempt}`);
    }
    const again = await receiveOne(c, 10000, 40000);
    const after = Date.now() - at;
    console.log(`RECV invisible id=${again.messageId} body=${again.body} attempt=${again.deliveryAttempt} ` +
      `after ${after} ms`);
    if (again.messageId !== first.messageId) {
      throw new Error(`invisible: ${again.messageId} came back, not ${first.messageId}`);
    }
    if (again.deliveryAttempt !== 2) {
      throw new Error(`invisible: delivery attempt ${again.deliveryAttempt} the second time`);
    }
    if (after < 8000) throw new Error(`invisible: back after ${after} ms, before its 10 s invisible time`);
    await c.ack(again);
    console.log(`ACKED invisible id=${again.messageId}`);
    await receiveExactly('invisible-after-ack', c, 0, 0, 12000);
  } finally {
    await stop(p, c);
  }
}

// change-invisible: a message received with 60 s invisible, changed to 2 s,
// comes back long before 60 s with attempt 2; an ack with the receipt
// handle the change replaced is refused (INVALID_RECEIPT_HANDLE) and does
// not keep it away; acked with the new handle it does not come back.
async function caseChangeInvisible() {
  const t = 'node-change-invisible';
  let p;
  let c;
  try {
    p = await producer(t);
    c = await consumer('ng-change-invisible', t);
    await send('change-invisible', p, message(t, 'change-invisible-1', 'c'));
    const first = await receiveOne(c, 60000, 30000);
    console.log(`RECV change-invisible id=${first.messageId} body=${first.body} ` +
      `attempt=${first.deliveryAttempt} (60 s invisible)`);
    const at = Date.now();
    // The view as received: the SDK puts the new handle into first.
    const stale = { ...first };
    await c.changeInvisibleDuration(first, 2000)
      .catch(e => { throw new Error(`change-invisible: change: ${why(e)}`); });
    const renewed = first.receiptHandle !== stale.receiptHandle;
    console.log(`CHANGED change-invisible id=${first.messageId} to 2 s (new receipt handle: ${renewed})`);
    if (!renewed) throw new Error('change-invisible: the change gave no new receipt handle');
    await staleAck(c, stale);
    const again = await receiveOne(c, 20000, 40000);
    const after = Date.now() - at;
    console.log(`RECV change-invisible id=${again.messageId} body=${again.body} ` +
      `attempt=${again.deliveryAttempt} after ${after} ms`);
    if (again.messageId !== first.messageId) {
      throw new Error(`change-invisible: ${again.messageId} came back, not ${first.messageId}`);
    }
    if (after >= 30000) throw new Error(`change-invisible: back only after ${after} ms`);
    if (again.deliveryAttempt !== 2) {
      throw new Error(`change-invisible: delivery attempt ${again.deliveryAttempt} the second time`);
    }
    await c.ack(again);
    console.log(`ACKED change-invisible id=${again.messageId}`);
    await receiveExactly('change-invisible-after-ack', c, 0, 0, 24000);
  } finally {
    await stop(p, c);
  }
}

// An ack with a receipt handle a change replaced: this SDK checks the
// ack's status, so the broker's refusal shows as INVALID_RECEIPT_HANDLE.
async function staleAck(c, stale) {
  try {
    await c.ack(stale);
  } catch (e) {
    console.log(`REFUSED change-invisible ack with the replaced handle: ${why(e)}`);
    if (e.code !== sdk().pb.Code.INVALID_RECEIPT_HANDLE) {
      throw new Error(`change-invisible: stale ack refused with code ${e.code}, not INVALID_RECEIPT_HANDLE`);
    }
    return;
  }
  throw new Error('change-invisible: an ack with the replaced receipt handle was taken');
}

module.exports = {
  'any-queue': caseAnyQueue,
  orderly: caseOrderly,
  invisible: caseInvisible,
  'change-invisible': caseChangeInvisible,
};
