package basalt.interop;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.store.OffsetStore;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/** The client's own behaviours: rebalancing, offset commit and resume, message trace. */
final class BehaviourCases {
    static final int QUEUES = 4;
    static final String TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC";

    private BehaviourCases() {}

    static void register(Map<String, Main.Case> m) {
        m.put("rebalance", BehaviourCases::rebalance);
        m.put("resume", BehaviourCases::resume);
        m.put("trace", BehaviourCases::trace);
    }

    /** Sends {@code n} keys {@code tag-i}; returns key -> result. */
    static Map<String, SendResult> sendBatch(Ctx ctx, DefaultMQProducer p, String topic, String tag, int n)
        throws Exception {
        Map<String, SendResult> out = new TreeMap<>();
        for (int i = 0; i < n; i++) {
            String k = tag + "-" + i;
            out.put(k, ConsumerCases.send(ctx, p, ProducerCases.msg(topic, tag, k)));
        }
        return out;
    }

    /**
     * Waits (bounded) until the broker holds, for the consumer's group, a
     * committed offset equal to each queue's max offset (everything consumed
     * is committed). Reads through the consumer's OffsetStore from the broker.
     */
    static void awaitCommitted(Ctx ctx, DefaultMQProducer p, DefaultMQPushConsumer c, Collection<MessageQueue> mqs)
        throws Exception {
        OffsetStore store = c.getDefaultMQPushConsumerImpl().getOffsetStore();
        Map<String, String> last = new TreeMap<>();
        ctx.eventually(30, "committed offsets at the queues' ends " + last, () -> {
            boolean all = true;
            for (MessageQueue mq : mqs) {
                try {
                    long committed = store.readOffset(mq, ReadOffsetType.READ_FROM_STORE);
                    long max = p.maxOffset(mq);
                    last.put(mq.getBrokerName() + "/" + mq.getQueueId(), committed + "/" + max);
                    all &= committed == max;
                } catch (Exception e) {
                    all = false;
                }
            }
            return all;
        });
        ctx.log("committed/max per queue: %s", last);
    }

    /**
     * A second consumer joins a group and leaves again. Sends happen only
     * while membership is stable and after every consumed offset is
     * committed, so each message must be delivered exactly once, by the
     * consumer that holds its queue.
     */
    static void rebalance(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        List<MessageQueue> mqs = ctx.createTopic(p, topic, QUEUES, 1);
        DefaultMQPushConsumer ca = ctx.pushConsumer("rb");
        ca.subscribe(topic, "*");
        Collector a = Collector.concurrent(ctx, "A", ca).start();
        ctx.eventually(30, "A to hold all queues", () -> a.heldQueues(topic).size() == QUEUES);
        Map<String, SendResult> phase1 = sendBatch(ctx, p, topic, "alone", 16);
        a.awaitTotal(16, 60);
        awaitCommitted(ctx, p, ca, mqs);

        DefaultMQPushConsumer cb = ctx.pushConsumer("rb");
        cb.subscribe(topic, "*");
        Collector b = Collector.concurrent(ctx, "B", cb).start();
        ctx.eventually(60, "A and B to split the queues 2 + 2", () -> {
            Set<MessageQueue> ha = a.heldQueues(topic);
            Set<MessageQueue> hb = b.heldQueues(topic);
            Set<MessageQueue> both = new HashSet<>(ha);
            both.addAll(hb);
            return ha.size() == 2 && hb.size() == 2 && both.size() == QUEUES;
        });
        Set<MessageQueue> heldA = a.heldQueues(topic);
        Set<MessageQueue> heldB = b.heldQueues(topic);
        ctx.log("after B joined: A holds %s, B holds %s", Ctx.queuesText(heldA), Ctx.queuesText(heldB));
        Map<String, SendResult> phase2 = sendBatch(ctx, p, topic, "pair", 16);
        ctx.eventually(60, "A and B to receive the 16 messages sent while both ran",
            () -> a.total() + b.total() >= 32);
        awaitCommitted(ctx, p, ca, mqs);
        for (Map.Entry<String, SendResult> e : phase2.entrySet()) {
            MessageQueue q = e.getValue().getMessageQueue();
            Collector holder = heldA.contains(q) ? a : b;
            ctx.check(holder.count(e.getKey()) == 1, "%s (queue %s) reached %s %d times", e.getKey(), q,
                holder.label, holder.count(e.getKey()));
        }
        ctx.check(a.deliveries().stream().anyMatch(d -> d.key().startsWith("pair"))
            && b.deliveries().stream().anyMatch(d -> d.key().startsWith("pair")),
            "both consumers should have received part of the second batch");

        cb.shutdown();
        ctx.eventually(60, "A to hold all queues again after B left", () -> a.heldQueues(topic).size() == QUEUES);
        Map<String, SendResult> phase3 = sendBatch(ctx, p, topic, "back", 16);
        a.awaitTotal(16 + countPrefix(a, "pair") + 16, 60);
        Thread.sleep(Collector.SETTLE_MS);
        Map<String, Integer> wrong = new TreeMap<>();
        for (Map<String, SendResult> batch : List.of(phase1, phase2, phase3)) {
            for (String k : batch.keySet()) {
                int n = a.count(k) + b.count(k);
                if (n != 1) {
                    wrong.put(k, n);
                }
            }
        }
        ctx.check(a.total() + b.total() == 48 && wrong.isEmpty(),
            "48 messages should arrive exactly once across A and B; A got %d, B got %d, wrong counts %s",
            a.total(), b.total(), wrong);
        ctx.log("48 messages over three memberships, each delivered exactly once (A %d, B %d)", a.total(),
            b.total());
    }

    static int countPrefix(Collector c, String prefix) {
        return (int) c.deliveries().stream().filter(d -> d.key().startsWith(prefix)).count();
    }

    /**
     * Offsets survive a consumer restart: a consumer reads a batch, its
     * offsets reach the broker (the periodic commit), it shuts down; a new
     * consumer of the group gets only what was sent since. Then that one
     * shuts down right after consuming (the commit at shutdown) and a third
     * gets only the next batch.
     */
    static void resume(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        List<MessageQueue> mqs = ctx.createTopic(p, topic, QUEUES, 1);
        List<String> first = new ArrayList<>(sendBatch(ctx, p, topic, "first", 12).keySet());
        DefaultMQPushConsumer c1 = ctx.pushConsumer("g");
        c1.subscribe(topic, "*");
        Collector col1 = Collector.concurrent(ctx, "c1", c1).start();
        col1.expectExactly(first, 60);
        awaitCommitted(ctx, p, c1, mqs);
        c1.shutdown();

        List<String> second = new ArrayList<>(sendBatch(ctx, p, topic, "second", 12).keySet());
        DefaultMQPushConsumer c2 = ctx.pushConsumer("g");
        c2.subscribe(topic, "*");
        Collector col2 = Collector.concurrent(ctx, "c2", c2).start();
        col2.expectExactly(second, 60);
        // No wait for the periodic commit: shutdown persists the offsets.
        c2.shutdown();

        List<String> third = new ArrayList<>(sendBatch(ctx, p, topic, "third", 12).keySet());
        DefaultMQPushConsumer c3 = ctx.pushConsumer("g");
        c3.subscribe(topic, "*");
        Collector.concurrent(ctx, "c3", c3).start().expectExactly(third, 60);
    }

    /**
     * enableMsgTrace on a producer and a consumer: their trace records
     * (Pub, SubBefore, SubAfter) land in RMQ_SYS_TRACE_TOPIC, and a pull
     * consumer reads them back, one of each per message.
     */
    static void trace(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.startProducer(new DefaultMQProducer(ctx.group("p"), true, null));
        String topic = ctx.topic("");
        ctx.createTopic(p, topic, QUEUES, 1);
        Map<String, SendResult> sent = sendBatch(ctx, p, topic, "traced", 5);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(ctx.group("c"), true, null);
        ctx.prepare(c);
        c.subscribe(topic, "*");
        Collector.concurrent(ctx, "c", c).start().expectExactly(sent.keySet(), 60);
        Set<String> ids = new TreeSet<>();
        sent.values().forEach(r -> ids.add(r.getMsgId()));

        DefaultLitePullConsumer reader = ConsumerCases.litePull(ctx, "trace-reader");
        reader.setAutoCommit(false);
        reader.start();
        List<MessageQueue> queues = new ArrayList<>();
        ctx.eventually(30, "a route for " + TRACE_TOPIC, () -> {
            try {
                queues.addAll(reader.fetchMessageQueues(TRACE_TOPIC));
                return !queues.isEmpty();
            } catch (Exception e) {
                return false;
            }
        });
        ctx.log("%s queues: %s", TRACE_TOPIC, Ctx.queuesText(queues));
        // With traceTopicEnable the broker makes the trace topic itself,
        // with one queue (else the first trace send auto-creates it).
        Integer want = Integer.getInteger("trace.queues");
        ctx.check(want == null || queues.size() == want, "%s has %d queues, expected %d", TRACE_TOPIC, queues.size(),
            want);
        reader.assign(queues);
        for (MessageQueue mq : queues) {
            reader.seek(mq, 0);
        }
        Map<String, Set<String>> seen = new HashMap<>();
        long end = System.nanoTime() + 60_000_000_000L;
        while (!allTraced(seen, ids) && System.nanoTime() < end) {
            for (MessageExt m : reader.poll(1000)) {
                readTrace(ctx, m, topic, ids, seen);
            }
        }
        ctx.check(allTraced(seen, ids), "trace records per message id (want Pub, SubBefore, SubAfter each): %s",
            seen);
        ctx.log("every message has Pub, SubBefore and SubAfter trace records: %s", seen);
    }

    static boolean allTraced(Map<String, Set<String>> seen, Set<String> ids) {
        for (String id : ids) {
            Set<String> kinds = seen.get(id);
            if (kinds == null || !kinds.containsAll(List.of("Pub", "SubBefore", "SubAfter"))) {
                return false;
            }
        }
        return true;
    }

    /** Parses one trace message's records and notes those about our messages. */
    static void readTrace(Ctx ctx, MessageExt m, String topic, Set<String> ids, Map<String, Set<String>> seen) {
        String body = new String(m.getBody(), StandardCharsets.UTF_8);
        for (String record : body.split(String.valueOf((char) 2))) {
            String[] f = record.split(String.valueOf((char) 1));
            if (f.length < 3) {
                continue;
            }
            String id;
            switch (f[0]) {
                case "Pub":
                    id = f.length > 5 && f[4].equals(topic) ? f[5] : null;
                    break;
                case "SubBefore":
                    id = f.length > 5 ? f[5] : null;
                    break;
                case "SubAfter":
                    id = f[2];
                    break;
                default:
                    id = null;
            }
            if (id != null && ids.contains(id)) {
                ctx.log("TRACE %s id=%s from %s", f[0], id, Ctx.where(m));
                seen.computeIfAbsent(id, x -> new TreeSet<>()).add(f[0]);
            }
        }
    }
}
