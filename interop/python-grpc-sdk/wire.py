"""The `wire` case: hostile gRPC input below the SDK, with grpcio itself.
Each piece gets a clear gRPC status (or a closed connection), and the
broker serves a normal send and receive afterwards."""

import socket
import threading
import time

import grpc

from sdk import CaseFailed, consumer, message, producer, receive_exactly, say, send, stop

SERVICE = "/apache.rocketmq.v2.MessagingService/"


def expect_status(label, call, allowed):
    """Runs `call`, which must fail with one of the `allowed` codes."""
    try:
        call()
    except grpc.RpcError as e:
        say(f"STATUS wire {label}: {e.code().name} {e.details()!r}")
        if e.code() not in allowed:
            raise CaseFailed(f"wire: {label} answered {e.code().name}, expected {[a.name for a in allowed]}")
        # tonic answers an unknown method with the bare code, as the
        # gRPC spec has it; every other refusal says why.
        if not e.details() and e.code() != grpc.StatusCode.UNIMPLEMENTED:
            raise CaseFailed(f"wire: {label} answered {e.code().name} without a message")
        return
    raise CaseFailed(f"wire: {label} was answered as if well formed")


def malformed(endpoint):
    """Bytes that are no protobuf message, and a method that does not exist."""
    with grpc.insecure_channel(endpoint) as ch:
        send_raw = ch.unary_unary(SERVICE + "SendMessage")
        expect_status("undecodable SendMessage", lambda: send_raw(b"\xff\xff\xff\xff\x0f\x08", timeout=5),
                      (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT))
        route_raw = ch.unary_unary(SERVICE + "QueryRoute")
        # A field of wire type 7 (invalid) inside an otherwise short message.
        expect_status("invalid wire type", lambda: route_raw(b"\x0f", timeout=5),
                      (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT))
        nothing = ch.unary_unary(SERVICE + "NoSuchRpc")
        expect_status("unknown RPC", lambda: nothing(b"", timeout=5), (grpc.StatusCode.UNIMPLEMENTED,))


def dropped_streams(endpoint):
    """A Telemetry stream opened and cancelled, one whose channel is closed
    mid-stream, and a TCP connection that sends no HTTP/2 and hangs up."""
    with grpc.insecure_channel(endpoint) as ch:
        tele = ch.stream_stream(SERVICE + "Telemetry")
        stop_sending = threading.Event()

        def requests():
            stop_sending.wait(2)
            return
            yield b""  # noqa: unreachable; makes this a generator

        call = tele(requests())
        time.sleep(0.5)
        call.cancel()
        stop_sending.set()
        say("DROPPED wire: a Telemetry stream cancelled by the client")
    ch = grpc.insecure_channel(endpoint)
    tele = ch.stream_stream(SERVICE + "Telemetry")
    gate = threading.Event()

    def hold():
        gate.wait(3)
        return
        yield b""  # noqa: unreachable

    tele(hold())
    time.sleep(0.5)
    ch.close()
    gate.set()
    say("DROPPED wire: a channel closed under an open Telemetry stream")
    host, port = endpoint.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\x00" * 64)
        s.settimeout(5)
        try:
            s.recv(1024)
        except (socket.timeout, ConnectionError):
            pass
    say("DROPPED wire: a connection that spoke no HTTP/2")


def case_wire(s):
    malformed(s.endpoint)
    dropped_streams(s.endpoint)
    # The broker serves on: a normal send and receive.
    t = "py-wire"
    p = producer(s, t)
    c = consumer(s, "pg-wire", t)
    try:
        send("wire", p, message(t, "after-the-hostile-input", "w"))
        got = receive_exactly("wire", c, 1, 60, 2)
        if got[0].body != "after-the-hostile-input":
            raise CaseFailed(f"wire: received {got[0].body!r}")
    finally:
        stop("producer", p)
        stop("consumer", c)
