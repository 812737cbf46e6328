"""What every case of cases.py uses: the SDK's clients as the cases start
them, sending with a printed receipt, and receiving exactly the expected
messages (each printed, acked, counted, no duplicate, nothing more after).

Times are as the SDK takes them: invisible and long polling durations in
whole seconds; a received message's timestamps in milliseconds.
"""

import time

from rocketmq import (ClientConfiguration, Credentials, FilterExpression,
                      Message, Producer, SimpleConsumer)

# The invisible time of the receives that ack at once, seconds.
RECEIVE_INVISIBLE = 20
# How long one receive waits for messages (the SDK's await duration: the
# request's long_polling_timeout), seconds.
AWAIT = 5


class CaseFailed(Exception):
    """A case saw something other than what it expects."""


class Settings:
    """How the clients reach the broker: its gRPC endpoint (host:port) and
    whether they dial TLS (None: the SDK's default, which is plain text)."""

    def __init__(self, endpoint, tls):
        self.endpoint = endpoint
        self.tls = tls

    def tls_args(self):
        """The constructor argument for TLS, or none for the SDK's default."""
        return {} if self.tls is None else {"tls_enable": self.tls}


def say(*parts):
    """Prints one line at once (the test may kill a run at its deadline)."""
    print(*parts, flush=True)


def now_ms():
    return time.time_ns() // 1_000_000


def config(settings):
    # Basalt runs without ACL here; the SDK signs every call with the empty
    # access key all the same.
    return ClientConfiguration(settings.endpoint, Credentials())


def producer(settings, topic, checker=None):
    """A started producer of topic (with a transaction checker if given)."""
    p = Producer(config(settings), (topic,), checker, **settings.tls_args())
    p.startup()
    return p


def consumer(settings, group, topic, expression=None):
    """A started SimpleConsumer of group subscribed to topic (every tag
    unless expression says otherwise), long polling AWAIT seconds."""
    c = SimpleConsumer(
        config(settings),
        group,
        {topic: expression or FilterExpression()},
        await_duration=AWAIT,
        **settings.tls_args(),
    )
    c.startup()
    return c


def stop(what, client):
    """Shuts a client down, reporting (not failing on) an error."""
    try:
        client.shutdown()
    except Exception as e:  # noqa: BLE001 - reported, the case decides
        say(f"STOP {what}: {e!r}")


def message(topic, body, tag, *keys):
    """A message of topic with a text body, a tag and keys."""
    m = Message()
    m.topic = topic
    m.body = body.encode()
    m.tag = tag
    # The SDK's keys setter adds one key per assignment.
    for k in keys:
        m.keys = k
    return m


def send(label, p, m, transaction=None):
    """Sends m (a half message when transaction is given), prints its
    receipt and returns it."""
    receipt = p.send(m, transaction)
    half = f" (half, transaction {receipt.transaction_id})" if transaction else ""
    say(f"SENT {label} id={receipt.message_id} body={short(m.body)}{half}")
    return receipt


def short(body):
    """A body for printing: at most 64 bytes of it."""
    if len(body) > 64:
        return f"{body[:64]!r}... ({len(body)} bytes)"
    return body.decode(errors="replace")


class Received:
    """One message as a case saw it."""

    def __init__(self, m):
        self.id = m.message_id
        self.body = m.body.decode(errors="replace")
        self.tag = m.tag
        self.keys = sorted(m.keys)
        self.props = dict(m.properties)
        self.group = m.message_group
        self.attempt = m.delivery_attempt
        self.born = m.born_timestamp
        self.due = m.delivery_timestamp
        self.corrupted = m.corrupted
        self.at = now_ms()

    def line(self, label):
        return (f"RECV {label} id={self.id} body={self.body} tag={self.tag} "
                f"keys={self.keys} group={self.group} attempt={self.attempt}"
                f"{' CORRUPTED' if self.corrupted else ''}")


def receive(c, max_messages=16, invisible=RECEIVE_INVISIBLE):
    """One receive: a list, empty when the broker had nothing (the SDK
    returns MESSAGE_NOT_FOUND as no messages)."""
    return c.receive(max_messages, invisible)


def receive_exactly(label, c, expected, deadline, settle):
    """Receives and acks until expected messages came (or deadline seconds
    passed), then makes sure nothing more comes for settle seconds. Returns
    them in arrival order; fails on a duplicate message id, a count other
    than expected, or more after them."""
    got, ids = [], set()
    end = time.monotonic() + deadline
    while len(got) < expected and time.monotonic() < end:
        for m in receive(c):
            r = Received(m)
            say(r.line(label))
            if r.id in ids:
                raise CaseFailed(f"{label}: duplicate message {r.id}")
            ids.add(r.id)
            got.append(r)
            c.ack(m)
    settle_end = time.monotonic() + settle
    while time.monotonic() < settle_end:
        extra = receive(c)
        for m in extra:
            say(f"RECV {label} EXTRA id={m.message_id} body={short(m.body)} "
                f"attempt={m.delivery_attempt}")
            c.ack(m)
        if extra:
            raise CaseFailed(f"{label}: received more than the {expected} expected")
    say(f"COUNT {label} received={len(got)} expected={expected}")
    if len(got) != expected:
        raise CaseFailed(f"{label}: received {len(got)} of {expected}")
    return got


def receive_one(c, invisible, deadline):
    """Receives until one message comes (at most deadline seconds), asking
    for one at a time."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        views = receive(c, 1, invisible)
        if len(views) > 1:
            raise CaseFailed(f"asked for one message, got {len(views)}")
        if views:
            return views[0]
    raise CaseFailed(f"no message within {deadline} s")


def same_bodies(label, sent, got):
    """Fails unless got holds exactly the bodies sent (in any order)."""
    want = sorted(sent)
    have = sorted(r.body for r in got)
    if want != have:
        raise CaseFailed(f"{label}: sent {want}, received {have}")

