package basalt.grpc;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * Runs named cases of the RocketMQ 5 gRPC SDK against one Basalt broker:
 * {@code Main ENDPOINTS CASE...}. System properties shape the clients:
 * {@code grpc.ssl} is {@code false} (the default here: plain text),
 * {@code true}, or {@code sdk-default} (enableSsl not called: the SDK's own
 * default, TLS); {@code grpc.ak} and {@code grpc.sk} give credentials
 * (StaticSessionCredentialsProvider). Topic {@code grpc-CASE} and group
 * {@code g-CASE} belong to each case (the test creates the topics). Every
 * case prints what it sent and received and fails unless each message
 * arrived exactly once (and, where the case says, at the right time). The
 * last line is ALL PASSED, or the process exits 1 naming what failed.
 */
public final class Main {
    static ClientServiceProvider provider;
    static ClientConfiguration config;

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: Main ENDPOINTS CASE...");
            System.exit(2);
        }
        provider = ClientServiceProvider.loadService();
        config = configuration(args[0]);
        List<String> failed = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            String name = args[i];
            long t0 = System.currentTimeMillis();
            try {
                run(name);
                System.out.printf("CASE %s PASSED in %d ms%n", name, System.currentTimeMillis() - t0);
            } catch (Throwable t) {
                System.out.printf("CASE %s FAILED: %s%n", name, t);
                t.printStackTrace(System.out);
                failed.add(name);
            }
        }
        if (failed.isEmpty()) {
            System.out.println("ALL PASSED");
            System.exit(0);
        }
        System.out.println("FAILED: " + failed);
        System.exit(1);
    }

    static ClientConfiguration configuration(String endpoints) {
        ClientConfigurationBuilder b = ClientConfiguration.newBuilder()
            .setEndpoints(endpoints)
            .setRequestTimeout(Duration.ofSeconds(10));
        String ssl = System.getProperty("grpc.ssl", "false");
        switch (ssl) {
            case "false": b.enableSsl(false); break;
            case "true": b.enableSsl(true); break;
            case "sdk-default": break;
            default: throw new IllegalArgumentException("grpc.ssl=" + ssl);
        }
        String ak = System.getProperty("grpc.ak");
        String sk = System.getProperty("grpc.sk");
        if (ak != null) {
            b.setCredentialProvider(new StaticSessionCredentialsProvider(ak, sk == null ? "" : sk));
        }
        System.out.printf("CONFIG endpoints=%s ssl=%s credentials=%s%n", endpoints, ssl,
            ak == null ? "none" : ak);
        return b.build();
    }

    static void run(String name) throws Exception {
        switch (name) {
            case "normal": Cases.normal(); break;
            case "fifo": Cases.fifo(); break;
            case "delay": Cases.delay(); break;
            case "transaction": Cases.transaction(); break;
            case "invisible": Cases.invisible(); break;
            case "change-invisible": Cases.changeInvisible(); break;
            case "bad-input": Cases.badInput(); break;
            case "mixed-produce": Cases.mixedProduce(); break;
            case "mixed-consume": Cases.mixedConsume(); break;
            case "refused": Cases.refused(); break;
            case "push": ConsumeCases.push(); break;
            case "push-retry": ConsumeCases.pushRetry(); break;
            case "dlq": ConsumeCases.dlq(); break;
            case "fifo-two": ConsumeCases.fifoTwo(); break;
            case "restart-before": ConsumeCases.restartBefore(); break;
            case "restart-after": ConsumeCases.restartAfter(); break;
            default: throw new IllegalArgumentException("unknown case " + name);
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static Producer producer(String topic) throws Exception {
        return provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build();
    }

    static SimpleConsumer consumer(String group, String topic, String tagExpression) throws Exception {
        return provider.newSimpleConsumerBuilder()
            .setClientConfiguration(config)
            .setConsumerGroup(group)
            .setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(Collections.singletonMap(topic,
                new FilterExpression(tagExpression, FilterExpressionType.TAG)))
            .build();
    }

    static Message message(String topic, String body, String tag, String key) {
        return provider.newMessageBuilder().setTopic(topic).setTag(tag).setKeys(key)
            .setBody(body.getBytes(StandardCharsets.UTF_8)).build();
    }

    static String body(MessageView m) {
        byte[] b = new byte[m.getBody().remaining()];
        m.getBody().duplicate().get(b);
        return new String(b, StandardCharsets.UTF_8);
    }

    /**
     * Receives and acks until {@code expected} messages came (or the
     * deadline passed), then makes sure nothing more comes for {@code
     * settleMs}. Returns bodies in arrival order; fails on a duplicate.
     */
    static List<String> receiveExactly(String label, SimpleConsumer c, int expected, long deadlineMs,
        long settleMs) throws Exception {
        List<String> got = new ArrayList<>();
        Set<String> ids = new TreeSet<>();
        long end = System.currentTimeMillis() + deadlineMs;
        while (got.size() < expected && System.currentTimeMillis() < end) {
            for (MessageView m : c.receive(16, Duration.ofSeconds(20))) {
                String b = body(m);
                System.out.printf("RECV %s id=%s body=%s tag=%s attempt=%d group=%s%n", label, m.getMessageId(), b,
                    m.getTag().orElse(""), m.getDeliveryAttempt(), m.getMessageGroup().orElse(""));
                check(ids.add(m.getMessageId().toString()), label + ": duplicate " + m.getMessageId());
                got.add(b);
                c.ack(m);
            }
        }
        long settleEnd = System.currentTimeMillis() + settleMs;
        while (System.currentTimeMillis() < settleEnd) {
            List<MessageView> more = c.receive(16, Duration.ofSeconds(20));
            for (MessageView m : more) {
                System.out.printf("RECV %s EXTRA id=%s body=%s%n", label, m.getMessageId(), body(m));
                c.ack(m);
            }
            check(more.isEmpty(), label + ": received more than the " + expected + " messages expected");
        }
        System.out.printf("COUNT %s received=%d expected=%d%n", label, got.size(), expected);
        check(got.size() == expected, label + ": received " + got.size() + " of " + expected);
        return got;
    }

    static SendReceipt send(String label, Producer p, Message m) throws Exception {
        SendReceipt r = p.send(m);
        System.out.printf("SENT %s id=%s body=%s%n", label, r.getMessageId(),
            new String(bytes(m), StandardCharsets.UTF_8));
        return r;
    }

    static byte[] bytes(Message m) {
        byte[] b = new byte[m.getBody().remaining()];
        m.getBody().duplicate().get(b);
        return b;
    }

    static Map<String, List<String>> byGroup(List<String> bodies) {
        Map<String, List<String>> out = new LinkedHashMap<>();
        for (String b : bodies) {
            out.computeIfAbsent(b.split(":")[0], k -> new ArrayList<>()).add(b);
        }
        return out;
    }

    static final Map<String, String> CHECKED = Collections.synchronizedMap(new HashMap<>());

    static TransactionResolution resolve(MessageView m) {
        String b = body(m);
        System.out.printf("CHECK transaction id=%s body=%s%n", m.getMessageId(), b);
        CHECKED.put(m.getMessageId().toString(), b);
        return b.startsWith("check-commit") ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
    }

    static Producer transactionalProducer(String topic) throws Exception {
        return provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic)
            .setTransactionChecker(Main::resolve).build();
    }

    static Transaction begin(Producer p) throws Exception {
        return p.beginTransaction();
    }
}
