"""Self-checking cases of the RocketMQ 5 gRPC SDK for Python
(rocketmq-python-client) against one Basalt broker's gRPC MessagingService:

    python cases.py --endpoint 127.0.0.1:8081 [--tls sdk-default|on|off] CASE...

Each case owns topic py-CASE and consumer groups pg-CASE* (the test creates
the topics). Every case prints what it sent (SENT) and received (RECV),
counts exactly (COUNT) and fails unless each message arrived exactly once
and, where the case says so, in order or at the right time. The last line is
ALL PASSED, or FAILED naming the failed cases, with exit status 1.

--tls: sdk-default (the default) constructs the clients without tls_enable,
which is plain text in this SDK; off passes tls_enable=False, on passes
tls_enable=True. With TLS the SDK verifies the server's certificate against
gRPC's default roots, so `on` first fetches the certificate the broker
serves and makes it gRPC's root (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH), before
gRPC is loaded. The SDK logs to $HOME/logs/rocketmq_python/.
"""

import argparse
import os
import ssl
import sys
import tempfile
import time
import traceback

def trust_server_certificate(endpoint):
    """Writes the certificate the broker serves on endpoint to a file and
    makes it gRPC's default root (it must happen before gRPC loads)."""
    host, port = endpoint.rsplit(":", 1)
    pem = ssl.get_server_certificate((host, int(port)))
    fd, path = tempfile.mkstemp(prefix="basalt-grpc-", suffix=".pem")
    with os.fdopen(fd, "w") as f:
        f.write(pem)
    os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = path
    print(f"TLS trusting the broker's certificate ({len(pem)} bytes of PEM) from {endpoint}",
          flush=True)


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", default="127.0.0.1:8081", help="the broker's gRPC host:port")
    ap.add_argument("--tls", choices=("sdk-default", "on", "off"), default="sdk-default")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("cases", nargs="*")
    args = ap.parse_args()
    if not args.list and not args.cases:
        ap.error("name at least one case")
    return args


def main():
    args = parse()
    if args.list:
        import casebook  # the SDK and the cases must import
        print("\n".join(casebook.CASES))
        return 0
    if args.tls == "on":
        trust_server_certificate(args.endpoint)
    # Imported only now: gRPC reads its TLS roots setting when it loads.
    import casebook
    import sdk
    tls = {"sdk-default": None, "on": True, "off": False}[args.tls]
    settings = sdk.Settings(args.endpoint, tls)
    failed = []
    for name in args.cases:
        run = casebook.CASES.get(name)
        if run is None:
            print(f"CASE {name} FAILED: unknown case", flush=True)
            failed.append(name)
            continue
        start = time.monotonic()
        try:
            run(settings)
        except sdk.CaseFailed as e:
            print(f"CASE {name} FAILED: {e}", flush=True)
            failed.append(name)
            continue
        except Exception:  # noqa: BLE001 - an SDK error fails the case
            print(f"CASE {name} FAILED with an exception:\n{traceback.format_exc()}", flush=True)
            failed.append(name)
            continue
        print(f"CASE {name} PASSED in {int((time.monotonic() - start) * 1000)} ms", flush=True)
    if failed:
        print(f"FAILED: {failed}", flush=True)
        return 1
    print("ALL PASSED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
