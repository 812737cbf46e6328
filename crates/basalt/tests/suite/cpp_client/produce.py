"""Sends --count messages with the C++ client in one send mode and prints a
line per acknowledged send: {"event": "sent", "keys": [...], "status": ...}.

Message i has key PREFIX-i, tag TAGS[i % len(TAGS)], a body of --body-size
bytes (common.body_for) and the properties idx, mode and size; orderly sends
also carry order_key (i % --order-keys) and seq (the index among the
messages of that order key), and pick the queue by order key.
"""

import sys
import threading

from rocketmq.client import Message, Producer

import common


def build(args, i):
    key = "%s-%d" % (args.prefix, i)
    tags = args.tags.split(",")
    m = Message(args.topic)
    m.set_keys(key)
    m.set_tags(tags[i % len(tags)])
    m.set_body(common.body_for(key, args.body_size))
    m.set_property("idx", str(i))
    m.set_property("mode", args.mode)
    m.set_property("size", str(args.body_size))
    if args.mode == "orderly":
        m.set_property("order_key", str(i % args.order_keys))
        m.set_property("seq", str(i // args.order_keys))
    if args.delay_level:
        m.set_delay_time_level(args.delay_level)
    return key, m


def result_fields(r):
    return {"status": int(r.status), "msg_id": r.msg_id, "offset": r.offset}


def send_async(producer, args):
    done = threading.Semaphore(0)
    for i in range(args.count):
        key, m = build(args, i)

        def ok(r, key=key):
            common.emit("sent", keys=[key], **result_fields(r))
            done.release()

        def failed(e, key=key):
            common.emit("send_failed", keys=[key], error=str(e))
            done.release()

        producer.send_async(m, ok, failed)
    for _ in range(args.count):
        if not done.acquire(timeout=60):
            common.emit("error", error="async send callbacks did not all arrive")
            return False
    return True


def send_all(producer, args):
    if args.mode == "async":
        return send_async(producer, args)
    i = 0
    while i < args.count:
        if args.mode == "batch":
            built = [build(args, j) for j in range(i, min(i + args.batch_size, args.count))]
            r = producer.send_batch([m for _, m in built])
            common.emit("sent", keys=[k for k, _ in built], **result_fields(r))
            i += len(built)
            continue
        key, m = build(args, i)
        if args.mode == "sync":
            common.emit("sent", keys=[key], **result_fields(producer.send_sync(m)))
        elif args.mode == "orderly":
            r = producer.send_orderly(m, i % args.order_keys)
            common.emit("sent", keys=[key], **result_fields(r))
        elif args.mode == "oneway":
            producer.send_oneway(m)
            common.emit("sent", keys=[key], status=None, msg_id="", offset=-1)
        i += 1
    return True


def main():
    p = common.base_args(__doc__)
    p.add_argument("--mode", required=True, choices=["sync", "async", "oneway", "orderly", "batch"])
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--prefix", required=True, help="key prefix")
    p.add_argument("--tags", default="TagA")
    p.add_argument("--body-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=10)
    p.add_argument("--order-keys", type=int, default=4)
    p.add_argument("--delay-level", type=int, default=0)
    args = p.parse_args()

    producer = Producer(args.group, timeout=10000)
    producer.set_namesrv_addr(args.namesrv)
    common.credentials(producer, args)
    producer.start()
    try:
        ok = send_all(producer, args)
    except Exception as e:  # the binding raises on any failed send
        common.emit("error", error="%s: %s" % (type(e).__name__, e))
        ok = False
    finally:
        producer.shutdown()
    common.emit("done", ok=ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
