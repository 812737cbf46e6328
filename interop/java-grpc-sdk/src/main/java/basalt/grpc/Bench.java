package basalt.grpc;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * A load generator on the RocketMQ 5 gRPC SDK for Java, for
 * scripts/bench-grpc.sh:
 *
 * <pre>
 * Bench ENDPOINTS send    --topic T [--size 1024] [--window 64] [--warmup 3] [--duration 10]
 * Bench ENDPOINTS consume --topic T --group G --count N [--batch 32] [--receivers 1] [--timeout 120]
 * </pre>
 *
 * send: {@code Producer.sendAsync} with at most WINDOW sends in flight, for
 * WARMUP seconds (not counted: the JIT), then DURATION seconds measured;
 * latency is from the call to its receipt. consume: a SimpleConsumer
 * (RECEIVERS threads on one consumer, each receiving up to BATCH messages
 * per call, invisible 60 s) acks every message with {@code ackAsync} until
 * N distinct messages were received and every ack answered; latency is
 * each receive call's and each ack's round trip.
 *
 * The last line is one JSON object: msgs (counted ones), msgs_per_sec,
 * latency_us {p50,p99,p999}, errors, sent_total (send: with the warm-up),
 * duplicates (consume), client_cpu_us_per_msg (this JVM's CPU over the
 * counted interval only, from getProcessCpuTime).
 */
public final class Bench {
    private Bench() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: Bench ENDPOINTS send|consume --key value ...");
            System.exit(2);
        }
        Map<String, String> o = options(args);
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(args[0])
            .enableSsl(false).setRequestTimeout(Duration.ofSeconds(10)).build();
        String json;
        switch (args[1]) {
            case "send": json = send(provider, config, o); break;
            case "consume": json = consume(provider, config, o); break;
            default: throw new IllegalArgumentException("mode " + args[1]);
        }
        System.out.println(json);
        System.exit(0);
    }

    static Map<String, String> options(String[] args) {
        Map<String, String> o = new HashMap<>();
        for (int i = 2; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --key, got " + args[i]);
            }
            o.put(args[i].substring(2), args[i + 1]);
        }
        return o;
    }

    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    static int num(Map<String, String> o, String key, int dflt) {
        return Integer.parseInt(o.getOrDefault(key, String.valueOf(dflt)));
    }

    static String send(ClientServiceProvider provider, ClientConfiguration config, Map<String, String> o)
        throws Exception {
        String topic = o.get("topic");
        int window = num(o, "window", 64);
        byte[] body = new byte[num(o, "size", 1024)];
        java.util.Arrays.fill(body, (byte) 'x');
        long warmupNs = num(o, "warmup", 3) * 1_000_000_000L;
        long durationNs = num(o, "duration", 10) * 1_000_000_000L;
        Hist hist = new Hist();
        AtomicLong counted = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        AtomicLong lastDone = new AtomicLong();
        long sent = 0;
        try (Producer p = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build()) {
            // One send first: the route and the session are up before timing.
            p.send(provider.newMessageBuilder().setTopic(topic).setBody(body).build());
            sent++;
            Semaphore slots = new Semaphore(window);
            long begin = System.nanoTime();
            long measureFrom = begin + warmupNs;
            long end = measureFrom + durationNs;
            long cpu0 = 0;
            boolean measuring = false;
            for (long now = begin; now < end; now = System.nanoTime()) {
                if (!measuring && now >= measureFrom) {
                    measuring = true;
                    cpu0 = cpuNanos();
                }
                slots.acquire();
                Message m = provider.newMessageBuilder().setTopic(topic).setBody(body).build();
                final boolean count = measuring;
                final long t0 = System.nanoTime();
                sent++;
                p.sendAsync(m).whenComplete((r, e) -> {
                    long t1 = System.nanoTime();
                    if (e != null) {
                        errors.incrementAndGet();
                    } else if (count) {
                        hist.record((t1 - t0) / 1_000);
                        counted.incrementAndGet();
                        lastDone.accumulateAndGet(t1, Math::max);
                    }
                    slots.release();
                });
            }
            slots.acquire(window);
            long cpu = cpuNanos() - cpu0;
            long n = counted.get();
            double secs = (Math.max(lastDone.get(), end) - measureFrom) / 1e9;
            return String.format("{\"mode\":\"send\",\"msgs\":%d,\"elapsed_s\":%.3f,\"msgs_per_sec\":%.1f,"
                    + "\"latency_us\":%s,\"errors\":%d,\"sent_total\":%d,\"client_cpu_us_per_msg\":%.2f}",
                n, secs, n / secs, hist.json(), errors.get(), sent, n == 0 ? 0.0 : cpu / 1e3 / n);
        }
    }

    static String consume(ClientServiceProvider provider, ClientConfiguration config, Map<String, String> o)
        throws Exception {
        String topic = o.get("topic");
        long count = Long.parseLong(o.get("count"));
        int batch = num(o, "batch", 32);
        int receivers = num(o, "receivers", 1);
        long deadline = System.nanoTime() + num(o, "timeout", 120) * 1_000_000_000L;
        State s = new State(count);
        try (SimpleConsumer c = provider.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(o.get("group")).setAwaitDuration(Duration.ofSeconds(2))
            .setSubscriptionExpressions(Collections.singletonMap(topic,
                new FilterExpression("*", FilterExpressionType.TAG)))
            .build()) {
            long cpu0 = cpuNanos();
            long begin = System.nanoTime();
            for (int i = 0; i < receivers; i++) {
                Thread t = new Thread(() -> receiveLoop(c, s, batch, deadline), "bench-receiver-" + i);
                t.setDaemon(true);
                t.start();
            }
            // Done when N distinct messages came and every ack was answered;
            // a receiver still in a long poll then is not waited for.
            synchronized (s) {
                while ((s.ids.size() < count || s.acksOut > 0) && System.nanoTime() < deadline) {
                    s.wait(10);
                }
            }
            long cpu = cpuNanos() - cpu0;
            double secs = (System.nanoTime() - begin) / 1e9;
            long n = s.ids.size();
            return String.format("{\"mode\":\"consume\",\"msgs\":%d,\"elapsed_s\":%.3f,\"msgs_per_sec\":%.1f,"
                    + "\"latency_us\":%s,\"receive_latency_us\":%s,\"errors\":%d,\"duplicates\":%d,"
                    + "\"receive_calls\":%d,\"acks_unanswered\":%d,\"client_cpu_us_per_msg\":%.2f}",
                n, secs, n / secs, s.ackHist.json(), s.receiveHist.json(), s.errors.get(), s.duplicates.get(),
                s.receiveCalls.get(), s.acksOut, n == 0 ? 0.0 : cpu / 1e3 / n);
        }
    }

    /** What the receivers of one consume run share. */
    static final class State {
        final long count;
        final Set<String> ids = ConcurrentHashMap.newKeySet();
        final Hist ackHist = new Hist();
        final Hist receiveHist = new Hist();
        final AtomicLong errors = new AtomicLong();
        final AtomicLong duplicates = new AtomicLong();
        final AtomicLong receiveCalls = new AtomicLong();
        long acksOut;

        State(long count) {
            this.count = count;
        }

        synchronized void ackDone() {
            acksOut--;
            notifyAll();
        }

        synchronized void ackSent() {
            acksOut++;
        }
    }

    static void receiveLoop(SimpleConsumer c, State s, int batch, long deadline) {
        while (s.ids.size() < s.count && System.nanoTime() < deadline) {
            List<MessageView> got;
            long t0 = System.nanoTime();
            try {
                got = c.receive(batch, Duration.ofSeconds(60));
            } catch (Exception e) {
                s.errors.incrementAndGet();
                continue;
            }
            s.receiveHist.record((System.nanoTime() - t0) / 1_000);
            s.receiveCalls.incrementAndGet();
            for (MessageView m : got) {
                if (!s.ids.add(m.getMessageId().toString())) {
                    s.duplicates.incrementAndGet();
                }
                long a0 = System.nanoTime();
                s.ackSent();
                c.ackAsync(m).whenComplete((v, e) -> {
                    if (e != null) {
                        s.errors.incrementAndGet();
                    } else {
                        s.ackHist.record((System.nanoTime() - a0) / 1_000);
                    }
                    s.ackDone();
                });
            }
        }
    }
}
