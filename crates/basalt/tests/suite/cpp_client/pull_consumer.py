"""Reads every queue of a topic from offset 0 with the C++ pull consumer and
prints {"event": "msg", ...} per message, then {"event": "done"}.
"""

import sys

from rocketmq.client import PullConsumer

import common


def main():
    p = common.base_args(__doc__)
    p.add_argument("--expression", default="*")
    args = p.parse_args()

    consumer = PullConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.start()
    try:
        for msg in consumer.pull(args.topic, expression=args.expression):
            common.emit("msg", **common.received(msg))
    finally:
        consumer.shutdown()
    common.emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
