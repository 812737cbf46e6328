"""The cases of cases.py: each takes the Settings, owns topic py-CASE and
consumer groups pg-CASE*, prints what it sends and receives, and raises
CaseFailed (or the SDK's exception) unless it saw exactly what it expects."""

import threading
import time
import zlib
from contextlib import contextmanager

from rocketmq import FilterExpression, TransactionChecker
from rocketmq.grpc_protocol import FilterType, TransactionResolution

import wire
from sdk import (CaseFailed, consumer, message, producer, receive_exactly,
                 receive_one, same_bodies, say, send, stop)


@contextmanager
def started(what, client):
    """The client, shut down when the block ends (however it ends)."""
    try:
        yield client
    finally:
        stop(what, client)


def case_normal(s):
    """20 messages with a tag, two keys and a user property: each received
    and acked once by a SimpleConsumer, carrying what was sent."""
    t, n = "py-normal", 20
    with started("producer", producer(s, t)) as p, \
            started("consumer", consumer(s, "pg-normal", t)) as c:
        sent = []
        for i in range(n):
            b = f"normal-{i}"
            m = message(t, b, "tagA", f"key-{i}", "both")
            m.add_property("index", str(i))
            send("normal", p, m)
            sent.append(b)
        got = receive_exactly("normal", c, n, 60, 6)
        for r in got:
            i = r.body.split("-", 1)[1]
            want = f"tag=tagA keys={sorted([f'key-{i}', 'both'])} index={i} group=None"
            have = f"tag={r.tag} keys={r.keys} index={r.props.get('index')} group={r.group}"
            if have != want:
                raise CaseFailed(f"normal: {r.body} came back with {have}, sent with {want}")
            # The SDK sends its born time in whole seconds.
            if not r.born or r.at - r.born > 60_000 or r.born - r.at > 1_000:
                raise CaseFailed(f"normal: {r.body} has born timestamp {r.born} (received at {r.at})")
        same_bodies("normal", sent, got)


def case_filter(s):
    """Nine messages of tags tagA, tagB, tagC with a property index 0..8: a
    tag consumer of "tagA || tagB" gets exactly the six tagA/tagB ones, a
    SQL92 consumer of "index >= 5" exactly the last four."""
    t = "py-filter"
    by_tag_expr = FilterExpression("tagA || tagB")
    by_sql_expr = FilterExpression("index >= 5", FilterType.SQL)
    with started("producer", producer(s, t)) as p, \
            started("tag consumer", consumer(s, "pg-filter-tag", t, by_tag_expr)) as by_tag, \
            started("sql consumer", consumer(s, "pg-filter-sql", t, by_sql_expr)) as by_sql:
        want_tag, want_sql = [], []
        for i in range(9):
            tag = ("tagA", "tagB", "tagC")[i % 3]
            b = f"filter-{i}-{tag}"
            m = message(t, b, tag)
            m.add_property("index", str(i))
            send("filter", p, m)
            if tag != "tagC":
                want_tag.append(b)
            if i >= 5:
                want_sql.append(b)
        same_bodies("filter-tag", want_tag,
                    receive_exactly("filter-tag", by_tag, len(want_tag), 60, 6))
        same_bodies("filter-sql", want_sql,
                    receive_exactly("filter-sql", by_sql, len(want_sql), 60, 6))


def case_fifo(s):
    """Three message groups of five, sent interleaved: each group arrives
    in send order, each message carrying its group."""
    t, groups = "py-fifo", ("ga", "gb", "gc")
    with started("producer", producer(s, t)) as p, \
            started("consumer", consumer(s, "pg-fifo", t)) as c:
        for i in range(5):
            for g in groups:
                m = message(t, f"{g}:{i}", "f")
                m.message_group = g
                send("fifo", p, m)
        got = receive_exactly("fifo", c, 15, 60, 6)
        by_group = {g: [] for g in groups}
        for r in got:
            g = r.body.split(":", 1)[0]
            if r.group != g:
                raise CaseFailed(f"fifo: {r.body} came with message group {r.group!r}")
            by_group[g].append(r.body)
        for g in groups:
            want = [f"{g}:{i}" for i in range(5)]
            say(f"ORDER fifo group={g} got={by_group[g]}")
            if by_group[g] != want:
                raise CaseFailed(f"fifo: group {g} out of order: {by_group[g]}")


def case_delay(s):
    """Three messages due 3 to 4 s after sending (the SDK takes a delivery
    time in whole seconds): none arrives before it, nor more than 8 s late,
    and each carries its delivery time."""
    t = "py-delay"
    with started("producer", producer(s, t)) as p, \
            started("consumer", consumer(s, "pg-delay", t)) as c:
        due_s = int(time.time()) + 4
        due_ms = due_s * 1000
        sent = []
        for i in range(3):
            b = f"delay-{i}"
            m = message(t, b, "d")
            # The SDK's docstring says milliseconds, but it puts the value
            # into the protobuf Timestamp's seconds.
            m.delivery_timestamp = due_s
            send("delay", p, m)
            sent.append(b)
        got = receive_exactly("delay", c, 3, 60, 4)
        for r in got:
            say(f"TIMING delay body={r.body} due={due_ms} received={r.at} "
                f"({r.at - due_ms:+d} ms)")
            if r.due != due_ms:
                raise CaseFailed(f"delay: {r.body} came back due {r.due}, sent due {due_ms}")
            # The broker's timer works in whole ticks: allow it a little.
            if due_ms - r.at > 200:
                raise CaseFailed(f"delay: {r.body} received {due_ms - r.at} ms before its time")
            if r.at - due_ms > 8_000:
                raise CaseFailed(f"delay: {r.body} received {r.at - due_ms} ms after its time")
        same_bodies("delay", sent, got)


class Resolver(TransactionChecker):
    """The transaction checker: commits check-commit-*, answers UNSPECIFIED
    (this SDK has no UNKNOWN) the first time it sees check-unknown-* and
    commits it after, and rolls back anything else."""

    def __init__(self):
        self.lock = threading.Lock()
        self.checked = []

    def check(self, m):
        b = m.body.decode(errors="replace")
        with self.lock:
            seen = self.checked.count(b)
            self.checked.append(b)
        say(f"CHECK transaction id={m.message_id} body={b} (check {seen + 1})")
        if b.startswith("check-commit"):
            return TransactionResolution.COMMIT
        if b.startswith("check-unknown"):
            if seen == 0:
                return TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED
            return TransactionResolution.COMMIT
        return TransactionResolution.ROLLBACK


def case_transaction(s):
    """One half message committed, one rolled back, three left open for the
    broker's check-back (the checker commits one, rolls back one, leaves the
    third unresolved once and commits it on the next check): exactly the
    three committed arrive, and only the open ones were checked."""
    t = "py-transaction"
    checker = Resolver()
    with started("producer", producer(s, t, checker)) as p, \
            started("consumer", consumer(s, "pg-transaction", t)) as c:
        tx = p.begin_transaction()
        send("transaction", p, message(t, "commit-1", "tx"), tx)
        tx.commit()
        say("ENDED transaction commit-1: commit")
        tx = p.begin_transaction()
        send("transaction", p, message(t, "rollback-1", "tx"), tx)
        tx.rollback()
        say("ENDED transaction rollback-1: rollback")
        for b in ("check-commit-1", "check-rollback-1", "check-unknown-1"):
            send("transaction", p, message(t, b, "tx"), p.begin_transaction())
        got = receive_exactly("transaction", c, 3, 90, 8)
        same_bodies("transaction", ["commit-1", "check-commit-1", "check-unknown-1"], got)
        with checker.lock:
            checked = list(checker.checked)
    say(f"COUNT transaction checked={checked}")
    if checked.count("check-commit-1") == 0 or checked.count("check-rollback-1") == 0:
        raise CaseFailed(f"transaction: the broker checked {checked}, not every open one")
    if checked.count("check-unknown-1") < 2:
        raise CaseFailed("transaction: check-unknown-1 checked "
                         f"{checked.count('check-unknown-1')} times, not again after UNSPECIFIED")
    if "commit-1" in checked or "rollback-1" in checked:
        raise CaseFailed(f"transaction: the broker checked an ended transaction: {checked}")


def refused(label, what, send_it):
    """Fails unless send_it raises; prints what the SDK raised."""
    try:
        send_it()
    except Exception as e:  # noqa: BLE001 - any refusal, printed
        say(f"REFUSED {label} {what}: {type(e).__name__}: {e}")
        return
    raise CaseFailed(f"{label}: {what} was taken")


def case_bad_input(s):
    """A send to a topic that does not exist and one over the size limit are
    refused; a good send after them is taken and received once."""
    t = "py-bad-input"
    with started("producer", producer(s, t)) as p, \
            started("consumer", consumer(s, "pg-bad-input", t)) as c:
        refused("bad-input", "a send to an unknown topic",
                lambda: send("bad-input", p, message("py-no-such-topic", "x", "t")))
        big = message(t, "x", "t")
        big.body = b"x" * (4 * 1024 * 1024 + 1)
        refused("bad-input", "a body over 4 MiB", lambda: send("bad-input", p, big))
        send("bad-input", p, message(t, "after-bad-input", "t"))
        same_bodies("bad-input", ["after-bad-input"], receive_exactly("bad-input", c, 1, 60, 4))


def case_invisible(s):
    """A message not acked comes back after its 10 s invisible time with
    delivery attempt 2, and not again once acked."""
    t = "py-invisible"
    with started("producer", producer(s, t)) as p, \
            started("consumer", consumer(s, "pg-invisible", t)) as c:
        send("invisible", p, message(t, "invisible-1", "i", "k"))
        first = receive_one(c, 10, 30)
        at = time.monotonic()
        say(f"RECV invisible id={first.message_id} body={first.body.decode()} "
            f"attempt={first.delivery_attempt} (not acked)")
        if first.delivery_attempt != 1:
            raise CaseFailed(f"invisible: first delivery attempt is {first.delivery_attempt}")
        again = receive_one(c, 10, 40)
        after = time.monotonic() - at
        say(f"RECV invisible id={again.message_id} body={again.body.decode()} "
            f"attempt={again.delivery_attempt} after {int(after * 1000)} ms")
        if again.message_id != first.message_id:
            raise CaseFailed(f"invisible: {again.message_id} came back, not {first.message_id}")
        if again.delivery_attempt != 2:
            raise CaseFailed(f"invisible: delivery attempt {again.delivery_attempt} the second time")
        if after < 8:
            raise CaseFailed(f"invisible: back after {after:.1f} s, before its 10 s invisible time")
        c.ack(again)
        say(f"ACKED invisible id={again.message_id}")
        receive_exactly("invisible-after-ack", c, 0, 0, 12)


def case_change_invisible(s):
    """A message received with 60 s invisible, changed to 2 s, comes back
    long before 60 s (an ack with the receipt handle the change replaced
    does not keep it away) with attempt 2; acked with the new handle it does
    not come back again."""
    t = "py-change-invisible"
    with started("producer", producer(s, t)) as p, \
            started("consumer", consumer(s, "pg-change-invisible", t)) as c:
        send("change-invisible", p, message(t, "change-1", "c", "k"))
        first = receive_one(c, 60, 30)
        say(f"RECV change-invisible id={first.message_id} body={first.body.decode()} "
            f"attempt={first.delivery_attempt} (60 s invisible)")
        at = time.monotonic()
        stale = first.receipt_handle
        # The SDK puts the new receipt handle into the message.
        c.change_invisible_duration(first, 2)
        fresh = first.receipt_handle
        say(f"CHANGED change-invisible id={first.message_id} to 2 s "
            f"(new receipt handle: {fresh != stale})")
        if fresh == stale:
            raise CaseFailed("change-invisible: the change gave no new receipt handle")
        first.receipt_handle = stale
        try:
            c.ack(first)
            say("ACKED change-invisible with the replaced handle: the broker answered OK")
        except Exception as e:  # noqa: BLE001 - either answer; the return counts
            say(f"ACKED change-invisible with the replaced handle: refused, {type(e).__name__}: {e}")
        again = receive_one(c, 20, 40)
        after = time.monotonic() - at
        say(f"RECV change-invisible id={again.message_id} body={again.body.decode()} "
            f"attempt={again.delivery_attempt} after {int(after * 1000)} ms")
        if again.message_id != first.message_id:
            raise CaseFailed(f"change-invisible: {again.message_id} came back, not {first.message_id}")
        if after >= 30:
            raise CaseFailed(f"change-invisible: back only after {after:.1f} s")
        if again.delivery_attempt != 2:
            raise CaseFailed(f"change-invisible: delivery attempt {again.delivery_attempt} the second time")
        c.ack(again)
        say(f"ACKED change-invisible id={again.message_id}")
        receive_exactly("change-invisible-after-ack", c, 0, 0, 24)


def digest_bodies():
    """Three bodies whose CRC32 is below 0x10000000 (eight hex digits only
    with a leading zero) and three whose CRC32 is not."""
    low, high, i = [], [], 0
    while len(low) < 3 or len(high) < 3:
        b = f"digest-{i}"
        crc = zlib.crc32(b.encode())
        if crc < 0x10000000 and len(low) < 3:
            low.append((b, crc))
        elif crc >= 0x10000000 and len(high) < 3:
            high.append((b, crc))
        i += 1
    return low + high


def case_digest(s):
    """Six messages, three of whose body CRC32 has a leading zero hex digit:
    the SDK checks each body against its CRC32 digest (its own hex is
    upper-case, zero-padded to eight digits) and marks none corrupted."""
    t = "py-digest"
    with started("producer", producer(s, t)) as p, \
            started("consumer", consumer(s, "pg-digest", t)) as c:
        bodies = digest_bodies()
        for b, crc in bodies:
            send("digest", p, message(t, b, "g"))
            say(f"CRC32 digest body={b} crc32={crc:08X}")
        got = receive_exactly("digest", c, len(bodies), 60, 4)
        same_bodies("digest", [b for b, _ in bodies], got)
        bad = sorted(r.body for r in got if r.corrupted)
        say(f"DIGEST digest corrupted={len(bad)} of {len(got)}: {bad}")
        if bad:
            raise CaseFailed(f"digest: the SDK marked {bad} corrupted")


CASES = {
    "normal": case_normal,
    "filter": case_filter,
    "fifo": case_fifo,
    "delay": case_delay,
    "transaction": case_transaction,
    "bad-input": case_bad_input,
    "invisible": case_invisible,
    "change-invisible": case_change_invisible,
    "digest": case_digest,
    "wire": wire.case_wire,
}
