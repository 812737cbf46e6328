"""Helpers shared by the C++ client drivers of compat_cpp_client.rs.

The drivers run the Apache RocketMQ C++ client (librocketmq 2.x, bundled in
the PyPI package `rocketmq` 0.4.4) as separate processes and print one JSON
object per line on stdout, which the Rust test reads. Message keys, tags,
bodies and properties are derived from an index, so the test can say exactly
what each consumer must receive.
"""

import argparse
import json
import sys
import time


def emit(event, **fields):
    """Prints one JSON line for the test."""
    fields["event"] = event
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def body_for(key, size):
    """The body of message `key`: its key and a filler, `size` bytes long."""
    seed = (key + ":").encode("utf-8")
    out = (seed * (size // len(seed) + 1))[:size]
    return out


def text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value or ""


def received(msg):
    """What a consumer reports for one received message."""
    key = text(msg.keys)
    size = int(text(msg.get_property("size")) or -1)
    return {
        "key": key,
        "tag": text(msg.tags),
        "topic": msg.topic,
        "id": msg.id,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "reconsume_times": msg.reconsume_times,
        "born_ms": msg.born_timestamp,
        "recv_ms": int(time.time() * 1000),
        "body_len": len(msg.body),
        "body_ok": size >= 0 and msg.body == body_for(key, size),
        "props": {
            name: text(msg.get_property(name))
            for name in ("idx", "mode", "size", "order_key", "seq")
        },
    }


def base_args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--namesrv", required=True, help="NameServer address host:port")
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--access-key", help="sign requests as this user (ACL)")
    p.add_argument("--secret-key", help="the user's password")
    p.add_argument("--channel", default="LOCAL", help="the client's OnsChannel field")
    return p


def credentials(client, args):
    """Makes `client` sign its requests (the C++ ClientRPCHook) when
    --access-key is given, and reports what it signs as."""
    if args.access_key:
        client.set_session_credentials(args.access_key, args.secret_key or "", args.channel)
        emit("credentials", access_key=args.access_key, channel=args.channel)
