package basalt.grpc;

import static basalt.grpc.Main.body;
import static basalt.grpc.Main.check;
import static basalt.grpc.Main.consumer;
import static basalt.grpc.Main.message;
import static basalt.grpc.Main.producer;
import static basalt.grpc.Main.provider;
import static basalt.grpc.Main.receiveExactly;
import static basalt.grpc.Main.send;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.Transaction;

/** The cases Main runs; each owns topic grpc-NAME and group g-NAME. */
final class Cases {
    private Cases() {
    }

    /** 20 normal messages, each received and acked exactly once. */
    static void normal() throws Exception {
        String t = "grpc-normal";
        try (Producer p = producer(t); SimpleConsumer c = consumer("g-normal", t, "*")) {
            List<String> sent = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                String b = "normal-" + i;
                send("normal", p, message(t, b, "tagA", "key-" + i));
                sent.add(b);
            }
            List<String> got = receiveExactly("normal", c, sent.size(), 60_000, 3_000);
            check(new java.util.TreeSet<>(got).equals(new java.util.TreeSet<>(sent)), "normal: bodies differ");
        }
    }

    /** Three message groups of five: each group arrives in send order. */
    static void fifo() throws Exception {
        String t = "grpc-fifo";
        try (Producer p = producer(t); SimpleConsumer c = consumer("g-fifo", t, "*")) {
            for (int i = 0; i < 5; i++) {
                for (String g : new String[] {"ga", "gb", "gc"}) {
                    Message m = provider.newMessageBuilder().setTopic(t).setTag("f").setMessageGroup(g)
                        .setBody((g + ":" + i).getBytes(StandardCharsets.UTF_8)).build();
                    send("fifo", p, m);
                }
            }
            List<String> got = receiveExactly("fifo", c, 15, 60_000, 3_000);
            for (Map.Entry<String, List<String>> e : Main.byGroup(got).entrySet()) {
                List<String> want = new ArrayList<>();
                for (int i = 0; i < 5; i++) {
                    want.add(e.getKey() + ":" + i);
                }
                System.out.printf("ORDER fifo group=%s got=%s%n", e.getKey(), e.getValue());
                check(e.getValue().equals(want), "fifo: group " + e.getKey() + " out of order: " + e.getValue());
            }
        }
    }

    /** Three messages due 3 s after sending: none arrives early. */
    static void delay() throws Exception {
        String t = "grpc-delay";
        try (Producer p = producer(t); SimpleConsumer c = consumer("g-delay", t, "*")) {
            long due = System.currentTimeMillis() + 3_000;
            for (int i = 0; i < 3; i++) {
                Message m = provider.newMessageBuilder().setTopic(t).setTag("d")
                    .setDeliveryTimestamp(due).setBody(("delay-" + i).getBytes(StandardCharsets.UTF_8)).build();
                send("delay", p, m);
            }
            receiveExactly("delay", c, 3, 60_000, 2_000);
            long now = System.currentTimeMillis();
            System.out.printf("TIMING delay due=%d all-received-by=%d%n", due, now);
            check(now >= due - 1_000, "delay: received before the delivery time");
        }
    }

    /**
     * Commit, rollback, and two left open for the broker's check-back (the
     * checker commits one, rolls the other back): exactly the two committed
     * arrive.
     */
    static void transaction() throws Exception {
        String t = "grpc-transaction";
        try (Producer p = Main.transactionalProducer(t); SimpleConsumer c = consumer("g-transaction", t, "*")) {
            Transaction commit = p.beginTransaction();
            sendHalf("transaction", p, txMessage(t, "commit-1"), commit);
            commit.commit();
            Transaction rollback = p.beginTransaction();
            sendHalf("transaction", p, txMessage(t, "rollback-1"), rollback);
            rollback.rollback();
            Transaction open1 = p.beginTransaction();
            sendHalf("transaction", p, txMessage(t, "check-commit-1"), open1);
            Transaction open2 = p.beginTransaction();
            sendHalf("transaction", p, txMessage(t, "check-rollback-1"), open2);
            List<String> got = receiveExactly("transaction", c, 2, 90_000, 5_000);
            check(got.contains("commit-1") && got.contains("check-commit-1"),
                "transaction: expected commit-1 and check-commit-1, got " + got);
            check(Main.CHECKED.size() >= 2, "transaction: the broker checked " + Main.CHECKED.size() + " of 2");
        }
    }

    static Message txMessage(String t, String b) {
        return provider.newMessageBuilder().setTopic(t).setTag("tx")
            .setBody(b.getBytes(StandardCharsets.UTF_8)).build();
    }

    static void sendHalf(String label, Producer p, Message m, Transaction tx) throws Exception {
        var r = p.send(m, tx);
        System.out.printf("SENT %s id=%s body=%s (half)%n", label, r.getMessageId(),
            new String(Main.bytes(m), StandardCharsets.UTF_8));
    }

    /** A message not acked comes back after its invisible time, attempt 2. */
    static void invisible() throws Exception {
        String t = "grpc-invisible";
        try (Producer p = producer(t); SimpleConsumer c = consumer("g-invisible", t, "*")) {
            send("invisible", p, message(t, "invisible-1", "i", "k"));
            MessageView first = receiveOne(c, Duration.ofSeconds(10), 30_000);
            long at = System.currentTimeMillis();
            System.out.printf("RECV invisible id=%s attempt=%d (not acked)%n", first.getMessageId(),
                first.getDeliveryAttempt());
            check(first.getDeliveryAttempt() == 1, "invisible: first attempt is " + first.getDeliveryAttempt());
            MessageView again = receiveOne(c, Duration.ofSeconds(10), 40_000);
            long after = System.currentTimeMillis() - at;
            System.out.printf("RECV invisible id=%s attempt=%d after %d ms%n", again.getMessageId(),
                again.getDeliveryAttempt(), after);
            check(again.getMessageId().equals(first.getMessageId()), "invisible: another message came back");
            check(again.getDeliveryAttempt() == 2, "invisible: attempt " + again.getDeliveryAttempt());
            check(after >= 8_000, "invisible: back after " + after + " ms, before its invisible time");
            c.ack(again);
            check(c.receive(16, Duration.ofSeconds(10)).isEmpty() || false, "invisible: came back after its ack");
        }
    }

    /** ChangeInvisibleDuration shortens 60 s to 2 s: back long before 60 s. */
    static void changeInvisible() throws Exception {
        String t = "grpc-change-invisible";
        try (Producer p = producer(t); SimpleConsumer c = consumer("g-change-invisible", t, "*")) {
            send("change-invisible", p, message(t, "change-1", "c", "k"));
            MessageView first = receiveOne(c, Duration.ofSeconds(60), 30_000);
            long at = System.currentTimeMillis();
            c.changeInvisibleDuration(first, Duration.ofSeconds(2));
            System.out.printf("CHANGED change-invisible id=%s to 2 s%n", first.getMessageId());
            MessageView again = receiveOne(c, Duration.ofSeconds(30), 40_000);
            long after = System.currentTimeMillis() - at;
            System.out.printf("RECV change-invisible id=%s attempt=%d after %d ms%n", again.getMessageId(),
                again.getDeliveryAttempt(), after);
            check(again.getMessageId().equals(first.getMessageId()), "change-invisible: another message");
            check(after < 30_000, "change-invisible: back only after " + after + " ms");
            c.ack(again);
        }
    }

    static MessageView receiveOne(SimpleConsumer c, Duration invisible, long deadlineMs) throws Exception {
        long end = System.currentTimeMillis() + deadlineMs;
        while (System.currentTimeMillis() < end) {
            List<MessageView> got = c.receive(1, invisible);
            if (!got.isEmpty()) {
                check(got.size() == 1, "asked for one message, got " + got.size());
                return got.get(0);
            }
        }
        throw new AssertionError("no message within " + deadlineMs + " ms");
    }

    /** Unknown topic and oversized body are refused; a good send works after. */
    static void badInput() throws Exception {
        String t = "grpc-bad-input";
        try (Producer p = producer(t)) {
            try {
                p.send(message("grpc-no-such-topic", "x", "t", "k"));
                throw new AssertionError("bad-input: a send to an unknown topic succeeded");
            } catch (org.apache.rocketmq.client.apis.ClientException e) {
                System.out.printf("REFUSED bad-input unknown topic: %s%n", e);
            }
            byte[] big = new byte[4 * 1024 * 1024 + 1];
            try {
                p.send(provider.newMessageBuilder().setTopic(t).setBody(big).build());
                throw new AssertionError("bad-input: an oversized message was taken");
            } catch (org.apache.rocketmq.client.apis.ClientException | IllegalArgumentException e) {
                System.out.printf("REFUSED bad-input oversized: %s%n", e);
            }
            send("bad-input", p, message(t, "after-bad-input", "t", "k"));
        }
    }

    /** Sends grpc.mixed.count messages for a remoting consumer to read. */
    static void mixedProduce() throws Exception {
        String t = "grpc-mixed-out";
        int n = Integer.getInteger("grpc.mixed.count", 10);
        try (Producer p = producer(t)) {
            for (int i = 0; i < n; i++) {
                send("mixed-produce", p, message(t, "from-grpc-" + i, "m", "grpc-key-" + i));
            }
        }
    }

    /** Receives exactly grpc.mixed.count messages a remoting producer sent. */
    static void mixedConsume() throws Exception {
        String t = "grpc-mixed-in";
        int n = Integer.getInteger("grpc.mixed.count", 10);
        try (SimpleConsumer c = consumer("g-mixed-in", t, "*")) {
            receiveExactly("mixed-consume", c, n, 60_000, 3_000);
        }
    }

    static String unused(MessageView m) {
        return body(m);
    }

    /**
     * The broker must refuse this client (credentials from grpc.ak/grpc.sk):
     * building a producer of topic grpc.refused.topic and sending one
     * message fails with the SDK exception named by grpc.refused.expect
     * (UnauthorizedException or ForbiddenException), and nothing is sent.
     */
    static void refused() throws Exception {
        String t = System.getProperty("grpc.refused.topic", "grpc-normal");
        String expect = System.getProperty("grpc.refused.expect", "UnauthorizedException");
        Throwable caught = null;
        try (Producer p = producer(t)) {
            send("refused", p, message(t, "must-not-be-stored", "r", "refused"));
        } catch (Throwable e) {
            caught = e;
        }
        check(caught != null, "refused: the send was accepted");
        String found = null;
        for (Throwable c = caught; c != null && found == null; c = c.getCause()) {
            System.out.printf("REFUSED cause %s: %s%n", c.getClass().getName(), c.getMessage());
            if (c.getClass().getSimpleName().equals(expect)) {
                found = c.getClass().getName();
            }
        }
        check(found != null, "refused: no " + expect + " in " + caught);
        System.out.printf("REFUSED as expected: %s%n", found);
    }
}
