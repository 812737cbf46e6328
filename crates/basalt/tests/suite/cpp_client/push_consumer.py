"""Runs a C++ push consumer and prints {"event": "msg", ...} per received
message (common.received). It prints {"event": "started"} once started and
stops when its stdin closes (or after --max-seconds), printing
{"event": "stopped"}.
"""

import sys
import threading

from rocketmq.client import MessageModel, PushConsumer

import common


def main():
    p = common.base_args(__doc__)
    p.add_argument("--expression", default="*")
    p.add_argument("--broadcasting", action="store_true")
    p.add_argument("--orderly", action="store_true")
    p.add_argument("--max-seconds", type=float, default=120)
    args = p.parse_args()

    model = MessageModel.BROADCASTING if args.broadcasting else MessageModel.CLUSTERING
    consumer = PushConsumer(args.group, orderly=args.orderly, message_model=model)
    consumer.set_namesrv_addr(args.namesrv)
    common.credentials(consumer, args)
    lock = threading.Lock()

    def on_message(msg):
        record = common.received(msg)
        with lock:
            common.emit("msg", **record)

    consumer.subscribe(args.topic, on_message, expression=args.expression)
    consumer.start()
    common.emit("started")

    closed = threading.Event()

    def wait_stdin():
        sys.stdin.read()
        closed.set()

    threading.Thread(target=wait_stdin, daemon=True).start()
    closed.wait(args.max_seconds)
    consumer.shutdown()
    common.emit("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
