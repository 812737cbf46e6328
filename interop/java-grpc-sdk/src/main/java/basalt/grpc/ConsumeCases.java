package basalt.grpc;

import static basalt.grpc.Main.body;
import static basalt.grpc.Main.check;
import static basalt.grpc.Main.config;
import static basalt.grpc.Main.consumer;
import static basalt.grpc.Main.message;
import static basalt.grpc.Main.producer;
import static basalt.grpc.Main.provider;
import static basalt.grpc.Main.receiveExactly;
import static basalt.grpc.Main.send;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.MessageListener;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * Consumer cases beyond the SimpleConsumer basics: the PushConsumer, a
 * message driven to the DLQ, two consumers of one FIFO group, and
 * messages left invisible across a broker restart (two runs, the test
 * restarting the broker between them).
 */
final class ConsumeCases {
    private ConsumeCases() {
    }

    static PushConsumer pushConsumer(String group, String topic, MessageListener listener) throws Exception {
        return provider.newPushConsumerBuilder()
            .setClientConfiguration(config)
            .setConsumerGroup(group)
            .setSubscriptionExpressions(Collections.singletonMap(topic,
                new FilterExpression("*", FilterExpressionType.TAG)))
            .setMessageListener(listener)
            .build();
    }

    /** Waits for {@code latch}, failing with what arrived if it does not open. */
    static void await(CountDownLatch latch, long ms, String label, Object got) throws Exception {
        check(latch.await(ms, TimeUnit.MILLISECONDS), label + ": timed out; got " + got);
    }

    /** 20 messages to a PushConsumer: each consumed once, tag and keys intact. */
    static void push() throws Exception {
        String t = "grpc-push";
        int n = 20;
        Map<String, Integer> seen = new ConcurrentHashMap<>();
        CountDownLatch all = new CountDownLatch(n);
        MessageListener listener = m -> {
            String b = body(m);
            System.out.printf("RECV push id=%s body=%s tag=%s keys=%s attempt=%d%n", m.getMessageId(), b,
                m.getTag().orElse(""), m.getKeys(), m.getDeliveryAttempt());
            if (seen.merge(b, 1, Integer::sum) == 1) {
                all.countDown();
            }
            return ConsumeResult.SUCCESS;
        };
        try (Producer p = producer(t); PushConsumer c = pushConsumer("g-push", t, listener)) {
            Set<String> sent = new TreeSet<>();
            for (int i = 0; i < n; i++) {
                send("push", p, message(t, "push-" + i, "tagP", "pkey-" + i));
                sent.add("push-" + i);
            }
            await(all, 60_000, "push", seen);
            Thread.sleep(3_000);
            System.out.printf("COUNT push received=%d expected=%d%n", seen.size(), n);
            check(seen.keySet().equals(sent), "push: bodies differ: " + seen.keySet());
            for (Map.Entry<String, Integer> e : seen.entrySet()) {
                check(e.getValue() == 1, "push: " + e.getKey() + " consumed " + e.getValue() + " times");
            }
        }
    }

    /**
     * A PushConsumer whose listener fails each message once: every message
     * comes back (the SDK retries it after the group's first backoff, 1 s)
     * with delivery attempt 2, and is consumed once then.
     */
    static void pushRetry() throws Exception {
        String t = "grpc-push-retry";
        int n = 5;
        Map<String, List<Integer>> attempts = new ConcurrentHashMap<>();
        CountDownLatch done = new CountDownLatch(n);
        MessageListener listener = m -> {
            String b = body(m);
            int attempt = m.getDeliveryAttempt();
            System.out.printf("RECV push-retry id=%s body=%s attempt=%d%n", m.getMessageId(), b, attempt);
            attempts.computeIfAbsent(b, k -> Collections.synchronizedList(new ArrayList<>())).add(attempt);
            if (attempt == 1) {
                return ConsumeResult.FAILURE;
            }
            done.countDown();
            return ConsumeResult.SUCCESS;
        };
        try (Producer p = producer(t); PushConsumer c = pushConsumer("g-push-retry", t, listener)) {
            for (int i = 0; i < n; i++) {
                send("push-retry", p, message(t, "retry-" + i, "r", "rkey-" + i));
            }
            await(done, 90_000, "push-retry", attempts);
            Thread.sleep(5_000);
            System.out.printf("ATTEMPTS push-retry %s%n", attempts);
            check(attempts.size() == n, "push-retry: " + attempts.size() + " of " + n + " messages");
            for (Map.Entry<String, List<Integer>> e : attempts.entrySet()) {
                check(e.getValue().equals(List.of(1, 2)), "push-retry: " + e.getKey() + " attempts " + e.getValue());
            }
        }
    }

    /**
     * Group g-dlq allows one redelivery (the test sets retryMaxTimes=1): a
     * message never acked is delivered twice (attempts 1 and 2), then not
     * again; the test then finds it in %DLQ%g-dlq.
     */
    static void dlq() throws Exception {
        String t = "grpc-dlq";
        try (Producer p = producer(t); SimpleConsumer c = consumer("g-dlq", t, "*")) {
            send("dlq", p, message(t, "doomed-1", "d", "dlq-key"));
            for (int attempt = 1; attempt <= 2; attempt++) {
                MessageView m = Cases.receiveOne(c, Duration.ofSeconds(10), 60_000);
                System.out.printf("RECV dlq id=%s body=%s attempt=%d (not acked)%n", m.getMessageId(), body(m),
                    m.getDeliveryAttempt());
                check(m.getDeliveryAttempt() == attempt, "dlq: attempt " + m.getDeliveryAttempt() + ", want " + attempt);
                check(body(m).equals("doomed-1"), "dlq: another message " + body(m));
            }
            long end = System.currentTimeMillis() + 15_000;
            while (System.currentTimeMillis() < end) {
                List<MessageView> more = c.receive(16, Duration.ofSeconds(10));
                for (MessageView m : more) {
                    System.out.printf("RECV dlq EXTRA id=%s attempt=%d%n", m.getMessageId(), m.getDeliveryAttempt());
                }
                check(more.isEmpty(), "dlq: delivered again past the group's maximum");
            }
            System.out.println("DLQ dlq doomed-1 delivered twice, then no more");
        }
    }

    /**
     * Two SimpleConsumers of the orderly group g-fifo-two take turns on three
     * message groups of six: each message group is received in send order
     * across both consumers (the next one is invisible until the previous
     * is acked), every message exactly once.
     */
    static void fifoTwo() throws Exception {
        String t = "grpc-fifo-two";
        List<String> order = Collections.synchronizedList(new ArrayList<>());
        Set<String> ids = ConcurrentHashMap.newKeySet();
        AtomicBoolean duplicate = new AtomicBoolean();
        int n = 18;
        try (Producer p = producer(t); SimpleConsumer a = consumer("g-fifo-two", t, "*");
             SimpleConsumer b = consumer("g-fifo-two", t, "*")) {
            for (int i = 0; i < 6; i++) {
                for (String g : new String[] {"ga", "gb", "gc"}) {
                    Message m = provider.newMessageBuilder().setTopic(t).setTag("f").setMessageGroup(g)
                        .setBody((g + ":" + i).getBytes(StandardCharsets.UTF_8)).build();
                    send("fifo-two", p, m);
                }
            }
            long end = System.currentTimeMillis() + 90_000;
            Thread[] workers = new Thread[2];
            SimpleConsumer[] cs = {a, b};
            for (int w = 0; w < 2; w++) {
                SimpleConsumer c = cs[w];
                String name = w == 0 ? "A" : "B";
                workers[w] = new Thread(() -> drainInOrder(c, name, n, end, order, ids, duplicate));
                workers[w].start();
            }
            for (Thread w : workers) {
                w.join();
            }
            check(!duplicate.get(), "fifo-two: a message came twice");
            System.out.printf("COUNT fifo-two received=%d expected=%d%n", order.size(), n);
            check(order.size() == n, "fifo-two: received " + order.size() + " of " + n);
            for (Map.Entry<String, List<String>> e : Main.byGroup(order).entrySet()) {
                List<String> want = new ArrayList<>();
                for (int i = 0; i < 6; i++) {
                    want.add(e.getKey() + ":" + i);
                }
                System.out.printf("ORDER fifo-two group=%s got=%s%n", e.getKey(), e.getValue());
                check(e.getValue().equals(want), "fifo-two: group " + e.getKey() + " out of order");
            }
        }
    }

    /** One consumer's share of fifoTwo: receive, record, then ack. */
    static void drainInOrder(SimpleConsumer c, String name, int n, long end, List<String> order, Set<String> ids,
        AtomicBoolean duplicate) {
        try {
            while (order.size() < n && System.currentTimeMillis() < end) {
                for (MessageView m : c.receive(4, Duration.ofSeconds(20))) {
                    String b = body(m);
                    System.out.printf("RECV fifo-two consumer=%s id=%s body=%s attempt=%d%n", name,
                        m.getMessageId(), b, m.getDeliveryAttempt());
                    if (!ids.add(m.getMessageId().toString())) {
                        duplicate.set(true);
                    }
                    order.add(b);
                    c.ack(m);
                }
            }
        } catch (Exception e) {
            System.out.printf("fifo-two consumer %s failed: %s%n", name, e);
            duplicate.set(true);
        }
    }

    /**
     * Before a restart: 10 messages sent and received with a 20 s invisible
     * time; the even ones are acked, the odd ones left invisible.
     */
    static void restartBefore() throws Exception {
        String t = "grpc-restart";
        try (Producer p = producer(t); SimpleConsumer c = consumer("g-restart", t, "*")) {
            for (int i = 0; i < 10; i++) {
                send("restart-before", p, message(t, "restart-" + i, "r", "k-" + i));
            }
            Set<String> got = new TreeSet<>();
            long end = System.currentTimeMillis() + 60_000;
            while (got.size() < 10 && System.currentTimeMillis() < end) {
                for (MessageView m : c.receive(16, Duration.ofSeconds(20))) {
                    String b = body(m);
                    check(got.add(b), "restart-before: " + b + " twice");
                    int i = Integer.parseInt(b.substring("restart-".length()));
                    boolean ack = i % 2 == 0;
                    System.out.printf("RECV restart-before body=%s attempt=%d %s%n", b, m.getDeliveryAttempt(),
                        ack ? "acked" : "left invisible");
                    if (ack) {
                        c.ack(m);
                    }
                }
            }
            check(got.size() == 10, "restart-before: received " + got.size() + " of 10");
        }
    }

    /**
     * After the restart: exactly the five odd messages come back (attempt
     * 2), none of the acked ones.
     */
    static void restartAfter() throws Exception {
        String t = "grpc-restart";
        try (SimpleConsumer c = consumer("g-restart", t, "*")) {
            List<String> got = receiveExactly("restart-after", c, 5, 90_000, 5_000);
            Set<String> want = new TreeSet<>();
            for (int i = 1; i < 10; i += 2) {
                want.add("restart-" + i);
            }
            check(new TreeSet<>(got).equals(want), "restart-after: got " + got + ", want " + want);
        }
    }
}
