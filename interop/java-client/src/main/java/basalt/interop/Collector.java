package basalt.interop;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * A push consumer that records every delivery (by message key), prints one
 * RECV line per delivery, and checks exact counts.
 */
public final class Collector {
    /** One delivery of one message. */
    public record Delivery(String key, String msgId, MessageQueue queue, long queueOffset,
                           int reconsumeTimes, long receivedAtMs, MessageExt msg) {}

    /** How long to keep listening after the expected count, to see duplicates. */
    static final long SETTLE_MS = 1500;

    final Ctx ctx;
    final String label;
    final DefaultMQPushConsumer consumer;
    private final Predicate<MessageExt> handler;
    private final Map<String, AtomicInteger> counts = new ConcurrentHashMap<>();
    private final List<Delivery> deliveries = new ArrayList<>();
    private final AtomicInteger total = new AtomicInteger();

    private Collector(Ctx ctx, String label, DefaultMQPushConsumer consumer, Predicate<MessageExt> handler) {
        this.ctx = ctx;
        this.label = label;
        this.consumer = consumer;
        this.handler = handler;
    }

    /** A concurrently consuming collector; {@code handler} false = RECONSUME_LATER. */
    static Collector concurrent(Ctx ctx, String label, DefaultMQPushConsumer c, Predicate<MessageExt> handler) {
        Collector col = new Collector(ctx, label, c, handler);
        c.setConsumeMessageBatchMaxSize(1);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                if (!col.record(m)) {
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        return col;
    }

    /** A collector that accepts every message, consuming concurrently. */
    static Collector concurrent(Ctx ctx, String label, DefaultMQPushConsumer c) {
        return concurrent(ctx, label, c, m -> true);
    }

    /** An orderly collector (MessageListenerOrderly) that accepts every message. */
    static Collector orderly(Ctx ctx, String label, DefaultMQPushConsumer c) {
        Collector col = new Collector(ctx, label, c, m -> true);
        c.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
            for (MessageExt m : msgs) {
                col.record(m);
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        return col;
    }

    private boolean record(MessageExt m) {
        String key = m.getKeys();
        Delivery d = new Delivery(key, m.getMsgId(),
            new MessageQueue(m.getTopic(), m.getBrokerName(), m.getQueueId()), m.getQueueOffset(),
            m.getReconsumeTimes(), System.currentTimeMillis(), m);
        synchronized (deliveries) {
            deliveries.add(d);
        }
        counts.computeIfAbsent(String.valueOf(key), k -> new AtomicInteger()).incrementAndGet();
        ctx.log("RECV[%s] key=%s id=%s tags=%s at=%s reconsume=%d", label, key, m.getMsgId(), m.getTags(),
            Ctx.where(m), m.getReconsumeTimes());
        boolean ok = handler.test(m);
        total.incrementAndGet();
        return ok;
    }

    Collector start() throws Exception {
        consumer.start();
        return this;
    }

    int total() {
        return total.get();
    }

    List<Delivery> deliveries() {
        synchronized (deliveries) {
            return new ArrayList<>(deliveries);
        }
    }

    int count(String key) {
        AtomicInteger n = counts.get(key);
        return n == null ? 0 : n.get();
    }

    /** The queues this consumer holds now (its rebalance's live process queues). */
    Set<MessageQueue> heldQueues(String topic) {
        Set<MessageQueue> held = new TreeSet<>();
        consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().forEach((mq, pq) -> {
            if (!pq.isDropped() && mq.getTopic().equals(topic)) {
                held.add(mq);
            }
        });
        return held;
    }

    /** Waits (bounded) until at least {@code n} deliveries were handled. */
    void awaitTotal(int n, long seconds) throws Exception {
        ctx.eventually(seconds, label + " to receive " + n + " deliveries (has " + total() + ")",
            () -> total() >= n);
    }

    /**
     * Waits for {@code keys.size()} deliveries, listens {@link #SETTLE_MS}
     * longer, then checks that each key was delivered exactly once and no
     * other key was delivered.
     */
    void expectExactly(Collection<String> keys, long seconds) throws Exception {
        awaitTotal(keys.size(), seconds);
        Thread.sleep(SETTLE_MS);
        checkExactly(keys);
    }

    /** Each of {@code keys} delivered exactly once, nothing else delivered. */
    void checkExactly(Collection<String> keys) throws CaseFailed {
        Map<String, Integer> wrong = new TreeMap<>();
        Set<String> expected = new TreeSet<>(keys);
        for (String k : expected) {
            if (count(k) != 1) {
                wrong.put(k, count(k));
            }
        }
        for (Map.Entry<String, AtomicInteger> e : counts.entrySet()) {
            if (!expected.contains(e.getKey())) {
                wrong.put(e.getKey(), e.getValue().get());
            }
        }
        ctx.check(wrong.isEmpty(), "%s: expected each of %d keys exactly once; wrong counts (key=times, "
            + "unexpected keys included): %s", label, expected.size(), wrong);
        ctx.log("%s: received each of %d messages exactly once", label, expected.size());
    }
}
