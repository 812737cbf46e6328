'use strict';
// Cases of what producers send: message fields, filters, shared
// consumption, message groups, delivery times, transactions, bad input.

const {
  sdk, producer, consumer, stop, message, why, send, receive, describe,
  receiveExactly, sameBodies,
} = require('./lib');

// normal: 20 messages with a tag, two keys and a user property, each
// received and acked exactly once, carrying what was sent.
async function caseNormal() {
  const t = 'node-normal';
  const n = 20;
  let p;
  let c;
  try {
    p = await producer(t);
    c = await consumer('ng-normal', t);
    const sent = [];
    for (let i = 0; i < n; i++) {
      const b = `normal-${i}`;
      await send('normal', p, message(t, b, 'tagA', [ `key-${i}`, 'both' ], { index: String(i) }));
      sent.push(b);
    }
    const got = await receiveExactly('normal', c, n, 60000, 6000);
    let corrupted = 0;
    for (const r of got) {
      const i = r.body.replace('normal-', '');
      const want = `tag=tagA keys=[key-${i},both] index=${i} group= attempt=1`;
      const have = `tag=${r.tag} keys=[${r.keys}] index=${r.props.get('index')} group=${r.group} ` +
        `attempt=${r.attempt}`;
      if (have !== want) {
        throw new Error(`normal: ${r.body} came back with ${have}, sent with ${want}`);
      }
      const born = r.born ? r.born.getTime() : 0;
      if (!born || Date.now() - born > 60000 || born - Date.now() > 1000) {
        throw new Error(`normal: ${r.body} has born timestamp ${r.born}`);
      }
      if (r.corrupted) corrupted++;
    }
    // The SDK's own body check (see docs/grpc.md, "Node.js SDK"): printed,
    // not asserted; the bodies themselves are compared exactly.
    console.log(`DIGEST normal marked corrupted by the SDK: ${corrupted} of ${got.length}`);
    sameBodies('normal', sent, got);
  } finally {
    await stop(p, c);
  }
}

// filter: nine messages of tags tagA, tagB, tagC with a user property
// index 0..8; a tag consumer of "tagA || tagB" gets exactly the six
// tagA/tagB ones, a SQL92 consumer of "index >= 5" exactly the last four.
async function caseFilter() {
  const t = 'node-filter';
  const { client, pb } = sdk();
  let p;
  let byTag;
  let bySql;
  try {
    p = await producer(t);
    byTag = await consumer('ng-filter-tag', t, new client.FilterExpression('tagA || tagB'));
    bySql = await consumer('ng-filter-sql', t,
      new client.FilterExpression('index >= 5', pb.FilterType.SQL));
    const wantTag = [];
    const wantSql = [];
    for (let i = 0; i < 9; i++) {
      const tag = [ 'tagA', 'tagB', 'tagC' ][i % 3];
      const b = `filter-${i}-${tag}`;
      await send('filter', p, message(t, b, tag, [], { index: String(i) }));
      if (tag !== 'tagC') wantTag.push(b);
      if (i >= 5) wantSql.push(b);
    }
    sameBodies('filter-tag', wantTag, await receiveExactly('filter-tag', byTag, wantTag.length, 60000, 6000));
    sameBodies('filter-sql', wantSql, await receiveExactly('filter-sql', bySql, wantSql.length, 60000, 6000));
  } finally {
    await stop(p, byTag, bySql);
  }
}

// shared: two SimpleConsumers of one group receive 30 messages at the same
// time; together they get each exactly once.
async function caseShared() {
  const t = 'node-shared';
  const n = 30;
  let p;
  const cs = [];
  try {
    p = await producer(t);
    cs.push(await consumer('ng-shared', t), await consumer('ng-shared', t));
    const sent = [];
    for (let i = 0; i < n; i++) {
      const b = `shared-${i}`;
      await send('shared', p, message(t, b, 's'));
      sent.push(b);
    }
    const got = [];
    const end = Date.now() + 60000;
    await Promise.all(cs.map(async (c, k) => {
      const label = `shared-${k + 1}`;
      while (got.length < n && Date.now() < end) {
        for (const m of await receive(c, 4)) {
          const r = describe(m);
          console.log(`RECV ${label} id=${r.id} body=${r.body} attempt=${r.attempt}`);
          await c.ack(m);
          got.push(r);
        }
      }
    }));
    // Nothing more for either (a duplicate would show here or in the count).
    for (const [ k, c ] of cs.entries()) {
      await receiveExactly(`shared-${k + 1}-after`, c, 0, 0, 6000);
    }
    console.log(`COUNT shared received=${got.length} expected=${n}`);
    if (new Set(got.map(r => r.id)).size !== got.length) {
      throw new Error('shared: a message came twice');
    }
    sameBodies('shared', sent, got);
  } finally {
    await stop(p, ...cs);
  }
}

// fifo: three message groups of five; each group arrives in send order and
// carries its group.
async function caseFifo() {
  const t = 'node-fifo';
  const groups = [ 'ga', 'gb', 'gc' ];
  let p;
  let c;
  try {
    p = await producer(t);
    c = await consumer('ng-fifo', t);
    for (let i = 0; i < 5; i++) {
      for (const g of groups) {
        await send('fifo', p, { ...message(t, `${g}:${i}`, 'f'), messageGroup: g });
      }
    }
    const got = await receiveExactly('fifo', c, 15, 60000, 6000);
    const byGroup = new Map(groups.map(g => [ g, []]));
    for (const r of got) {
      const g = r.body.split(':')[0];
      if (r.group !== g) throw new Error(`fifo: ${r.body} came with message group "${r.group}"`);
      byGroup.get(g).push(r.body);
    }
    for (const g of groups) {
      const want = [ 0, 1, 2, 3, 4 ].map(i => `${g}:${i}`).join(',');
      const have = byGroup.get(g).join(',');
      console.log(`ORDER fifo group=${g} got=[${have}]`);
      if (have !== want) throw new Error(`fifo: group ${g} out of order: [${have}]`);
    }
  } finally {
    await stop(p, c);
  }
}

// delay: three messages due 3 s after sending; none arrives early, nor
// more than 8 s late, and each carries its delivery time.
async function caseDelay() {
  const t = 'node-delay';
  let p;
  let c;
  try {
    p = await producer(t);
    c = await consumer('ng-delay', t);
    const due = new Date(Date.now() + 3000);
    const sent = [];
    for (let i = 0; i < 3; i++) {
      const b = `delay-${i}`;
      await send('delay', p, { ...message(t, b, 'd'), deliveryTimestamp: due });
      sent.push(b);
    }
    const got = await receiveExactly('delay', c, 3, 60000, 4000);
    for (const r of got) {
      const early = due.getTime() - r.at.getTime();
      console.log(`TIMING delay body=${r.body} due=${due.toISOString()} received=${r.at.toISOString()}`);
      if (!r.due || r.due.getTime() !== due.getTime()) {
        throw new Error(`delay: ${r.body} came back due ${r.due && r.due.toISOString()}, sent due ${due.toISOString()}`);
      }
      // The broker's timer works in whole ticks: allow it a little.
      if (early > 200) throw new Error(`delay: ${r.body} received ${early} ms before its delivery time`);
      // Nor long after (a loaded machine may delay the broker's timer).
      if (-early > 8000) throw new Error(`delay: ${r.body} received ${-early} ms after its delivery time`);
    }
    sameBodies('delay', sent, got);
  } finally {
    await stop(p, c);
  }
}

// The transaction checker's calls, by body.
const checked = [];

// The transaction checker: commits check-commit-*, answers UNSPECIFIED
// (the SDK then sends no EndTransaction, so the broker checks again) the
// first time it sees check-unknown-* and commits it after, and rolls back
// anything else.
const checker = {
  async check(view) {
    const { TransactionResolution } = sdk().pb;
    const b = view.body.toString();
    const seen = checked.filter(x => x === b).length;
    checked.push(b);
    console.log(`CHECK transaction id=${view.messageId} body=${b} (check ${seen + 1})`);
    if (b.startsWith('check-commit')) return TransactionResolution.COMMIT;
    if (b.startsWith('check-unknown')) {
      return seen === 0 ? TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED :
        TransactionResolution.COMMIT;
    }
    return TransactionResolution.ROLLBACK;
  },
};

// transaction: one half message committed, one rolled back, and three left
// open for the broker's check-back (the checker commits one, rolls back
// one, and leaves the third open once before committing it): exactly the
// three committed arrive, and only the open ones are checked.
async function caseTransaction() {
  const t = 'node-transaction';
  let p;
  let c;
  try {
    p = await producer(t, checker);
    c = await consumer('ng-transaction', t);
    const commit = p.beginTransaction();
    await send('transaction', p, message(t, 'commit-1', 'tx'), commit);
    await commit.commit().catch(e => { throw new Error(`transaction: commit: ${why(e)}`); });
    const rollback = p.beginTransaction();
    await send('transaction', p, message(t, 'rollback-1', 'tx'), rollback);
    await rollback.rollback().catch(e => { throw new Error(`transaction: rollback: ${why(e)}`); });
    for (const b of [ 'check-commit-1', 'check-rollback-1', 'check-unknown-1' ]) {
      await send('transaction', p, message(t, b, 'tx'), p.beginTransaction());
    }
    const got = await receiveExactly('transaction', c, 3, 90000, 8000);
    sameBodies('transaction', [ 'commit-1', 'check-commit-1', 'check-unknown-1' ], got);
    console.log(`COUNT transaction checked=[${checked}]`);
    const times = b => checked.filter(x => x === b).length;
    if (times('check-commit-1') === 0 || times('check-rollback-1') === 0) {
      throw new Error(`transaction: the broker checked [${checked}], not every open one`);
    }
    if (times('check-unknown-1') < 2) {
      throw new Error(`transaction: check-unknown-1 checked ${times('check-unknown-1')} times, not again`);
    }
    if (times('commit-1') > 0 || times('rollback-1') > 0) {
      throw new Error(`transaction: the broker checked an ended transaction: [${checked}]`);
    }
  } finally {
    await stop(p, c);
  }
}

// bad-input: a send to a topic that does not exist and one over the
// broker's size limit are refused; a good send works after them.
async function caseBadInput() {
  const t = 'node-bad-input';
  let p;
  try {
    p = await producer(t);
    const refused = async (what, m) => {
      try {
        await p.send(m);
      } catch (e) {
        console.log(`REFUSED bad-input ${what}: ${why(e)}`);
        return e;
      }
      throw new Error(`bad-input: the ${what} send was taken`);
    };
    const unknown = await refused('unknown topic', message('node-no-such-topic', 'x', 't'));
    // TOPIC_NOT_FOUND, from the route lookup.
    if (unknown.code !== sdk().pb.Code.TOPIC_NOT_FOUND) {
      throw new Error(`bad-input: unknown topic refused with code ${unknown.code}, not TOPIC_NOT_FOUND`);
    }
    await refused('oversized', { topic: t, body: Buffer.alloc(4 * 1024 * 1024 + 1) });
    await send('bad-input', p, message(t, 'after-bad-input', 't'));
  } finally {
    await stop(p);
  }
}

module.exports = {
  normal: caseNormal,
  filter: caseFilter,
  shared: caseShared,
  fifo: caseFifo,
  delay: caseDelay,
  transaction: caseTransaction,
  'bad-input': caseBadInput,
};
