package basalt.interop;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/** Every kind of consumer, each expecting exact counts. */
final class ConsumerCases {
    static final int QUEUES = 4;

    private ConsumerCases() {}

    static void register(Map<String, Main.Case> m) {
        m.put("push", ConsumerCases::push);
        m.put("orderly", ConsumerCases::orderly);
        m.put("broadcast", ConsumerCases::broadcast);
        m.put("tag", ConsumerCases::tag);
        m.put("sql92", ConsumerCases::sql92);
        m.put("lite-subscribe", ConsumerCases::liteSubscribe);
        m.put("lite-assign", ConsumerCases::liteAssign);
        m.put("dlq", ConsumerCases::dlq);
    }

    /** Creates the case's topic and sends {@code keys} to it, synchronously. */
    static String topicWith(Ctx ctx, DefaultMQProducer p, Collection<String> keys) throws Exception {
        String topic = ctx.topic("");
        ctx.createTopic(p, topic, QUEUES, 1);
        for (String k : keys) {
            send(ctx, p, ProducerCases.msg(topic, "T", k));
        }
        return topic;
    }

    static SendResult send(Ctx ctx, DefaultMQProducer p, Message m) throws Exception {
        SendResult r = p.send(m);
        ctx.sent(m.getKeys(), r);
        ctx.check(r.getSendStatus() == SendStatus.SEND_OK, "send %s: %s", m.getKeys(), r);
        return r;
    }

    static void push(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        List<String> keys = ProducerCases.keys(ctx, 20);
        String topic = topicWith(ctx, p, keys);
        DefaultMQPushConsumer c = ctx.pushConsumer("c");
        c.subscribe(topic, "*");
        Collector.concurrent(ctx, "c", c).start().expectExactly(keys, 60);
    }

    /** MessageListenerOrderly: each order's steps arrive once each, in step order. */
    static void orderly(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        ctx.createTopic(p, topic, QUEUES, 1);
        int orders = 5;
        int steps = 8;
        List<String> keys = new ArrayList<>();
        for (int s = 0; s < steps; s++) {
            for (int o = 0; o < orders; o++) {
                String k = "o" + o + "-s" + s;
                SendResult r = p.send(ProducerCases.msg(topic, "T", k),
                    (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size()), o);
                ctx.sent(k, r);
                ctx.check(r.getSendStatus() == SendStatus.SEND_OK, "send %s: %s", k, r);
                keys.add(k);
            }
        }
        DefaultMQPushConsumer c = ctx.pushConsumer("c");
        c.subscribe(topic, "*");
        Collector col = Collector.orderly(ctx, "c", c).start();
        col.expectExactly(keys, 60);
        Map<Integer, List<Integer>> seen = new TreeMap<>();
        for (Collector.Delivery d : col.deliveries()) {
            String[] parts = d.key().substring(1).split("-s");
            seen.computeIfAbsent(Integer.parseInt(parts[0]), x -> new ArrayList<>()).add(Integer.parseInt(parts[1]));
        }
        for (Map.Entry<Integer, List<Integer>> e : seen.entrySet()) {
            List<Integer> want = new ArrayList<>();
            for (int s = 0; s < steps; s++) {
                want.add(s);
            }
            ctx.check(e.getValue().equals(want), "order %d consumed in step order %s", e.getKey(), e.getValue());
        }
        ctx.log("every order's %d steps arrived in order: %s", steps, seen);
    }

    /** Two BROADCASTING consumers of one group each get every message once. */
    static void broadcast(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        List<String> keys = ProducerCases.keys(ctx, 12);
        String topic = topicWith(ctx, p, keys);
        List<Collector> cols = new ArrayList<>();
        for (String who : new String[] {"b1", "b2"}) {
            DefaultMQPushConsumer c = ctx.pushConsumer("bc");
            Compat.broadcasting(c);
            c.subscribe(topic, "*");
            cols.add(Collector.concurrent(ctx, who, c).start());
        }
        for (Collector col : cols) {
            col.expectExactly(keys, 60);
        }
    }

    /** Subscription "TagA || TagB": TagC messages are never delivered. */
    static void tag(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        ctx.createTopic(p, topic, QUEUES, 1);
        List<String> want = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            for (String tag : new String[] {"TagA", "TagB", "TagC"}) {
                String k = tag + "-" + i;
                send(ctx, p, ProducerCases.msg(topic, tag, k));
                if (!tag.equals("TagC")) {
                    want.add(k);
                }
            }
        }
        DefaultMQPushConsumer c = ctx.pushConsumer("c");
        c.subscribe(topic, "TagA || TagB");
        Collector col = Collector.concurrent(ctx, "c", c).start();
        col.expectExactly(want, 60);
        for (Collector.Delivery d : col.deliveries()) {
            ctx.check(d.key().startsWith(d.msg().getTags()), "%s arrived with tag %s", d.key(), d.msg().getTags());
        }
    }

    /** MessageSelector.bySql on user properties (the broker filters; enablePropertyFilter). */
    static void sql92(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        ctx.createTopic(p, topic, QUEUES, 1);
        List<String> want = new ArrayList<>();
        for (int n = 0; n < 12; n++) {
            String color = n % 2 == 0 ? "red" : "blue";
            String k = "n" + n + "-" + color;
            Message m = ProducerCases.msg(topic, "T", k);
            m.putUserProperty("n", Integer.toString(n));
            m.putUserProperty("color", color);
            send(ctx, p, m);
            if (n >= 4 && color.equals("red")) {
                want.add(k);
            }
        }
        DefaultMQPushConsumer c = ctx.pushConsumer("c");
        c.subscribe(topic, MessageSelector.bySql("n >= 4 AND color = 'red'"));
        Collector.concurrent(ctx, "c", c).start().expectExactly(want, 60);
    }

    static DefaultLitePullConsumer litePull(Ctx ctx, String groupSuffix) {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(ctx.group(groupSuffix));
        c.setNamesrvAddr(ctx.namesrv);
        c.setInstanceName(ctx.instance("lite"));
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        ctx.onClose(c::shutdown);
        return c;
    }

    /**
     * Polls until {@code n} messages came or {@code seconds} passed, then
     * polls once more (duplicates); returns key counts.
     */
    static Map<String, Integer> pollCounts(Ctx ctx, String label, DefaultLitePullConsumer c, int n, long seconds) {
        Map<String, Integer> counts = new TreeMap<>();
        int total = 0;
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        boolean extra = true;
        while (System.nanoTime() < end && (total < n || extra)) {
            if (total >= n) {
                extra = false;
            }
            for (MessageExt m : c.poll(1000)) {
                ctx.log("RECV[%s] key=%s id=%s at=%s", label, m.getKeys(), m.getMsgId(), Ctx.where(m));
                counts.merge(m.getKeys(), 1, Integer::sum);
                total++;
            }
        }
        return counts;
    }

    static void checkOnce(Ctx ctx, String label, Map<String, Integer> counts, List<String> keys) throws CaseFailed {
        Map<String, Integer> wrong = new TreeMap<>(counts);
        for (String k : keys) {
            if (wrong.getOrDefault(k, 0) == 1) {
                wrong.remove(k);
            } else {
                wrong.put(k, wrong.getOrDefault(k, 0));
            }
        }
        ctx.check(wrong.isEmpty(), "%s: expected each of %d keys exactly once; wrong counts: %s", label, keys.size(),
            wrong);
        ctx.log("%s: received each of %d messages exactly once", label, keys.size());
    }

    static void liteSubscribe(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        List<String> keys = ProducerCases.keys(ctx, 20);
        String topic = topicWith(ctx, p, keys);
        DefaultLitePullConsumer c = litePull(ctx, "c");
        c.subscribe(topic, "*");
        c.start();
        checkOnce(ctx, "lite", pollCounts(ctx, "lite", c, keys.size(), 60), keys);
    }

    /**
     * Assign mode: all queues assigned (a new group starting from the
     * first offset), polled, committed with commitSync; a second consumer
     * of the group assigned the same queues gets only what was sent after
     * the commit.
     *
     * No seek(): it is client-side only (no request reaches the broker),
     * and in the 4.9.x client a pull that assign() started may still be in
     * flight when seek() replaces its task; its result is kept, so the
     * queue is delivered twice (seen in CI, as a Java broker would see it).
     */
    static void liteAssign(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        List<String> keys = ProducerCases.keys(ctx, 16);
        String topic = topicWith(ctx, p, keys);
        DefaultLitePullConsumer c = litePull(ctx, "c");
        c.setAutoCommit(false);
        c.start();
        Collection<MessageQueue> mqs = c.fetchMessageQueues(topic);
        ctx.check(mqs.size() == QUEUES, "fetchMessageQueues: %s", mqs);
        c.assign(mqs);
        checkOnce(ctx, "assign1", pollCounts(ctx, "assign1", c, keys.size(), 60), keys);
        c.commitSync();
        Map<MessageQueue, Long> committed = new HashMap<>();
        for (MessageQueue mq : mqs) {
            committed.put(mq, c.committed(mq));
        }
        ctx.log("committed: %s", committed);
        c.shutdown();
        List<String> more = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            String k = ctx.name + "-after-" + i;
            send(ctx, p, ProducerCases.msg(topic, "T", k));
            more.add(k);
        }
        DefaultLitePullConsumer c2 = litePull(ctx, "c");
        c2.start();
        c2.assign(c2.fetchMessageQueues(topic));
        checkOnce(ctx, "assign2", pollCounts(ctx, "assign2", c2, more.size(), 60), more);
    }

    /**
     * maxReconsumeTimes=2 and a listener that always fails: each message is
     * delivered 3 times (reconsumeTimes 0, 1, 2), then lands in %DLQ%group,
     * where a consumer of another group reads each once.
     */
    static void dlq(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        List<String> keys = ProducerCases.keys(ctx, 6);
        String topic = topicWith(ctx, p, keys);
        DefaultMQPushConsumer c = ctx.pushConsumer("failing");
        c.setMaxReconsumeTimes(2);
        // A new group's retry topic is made by the broker at the first
        // heartbeat, after the consumer's first route lookup: with the
        // default 30 s route refresh, retries would start up to 30 s late.
        c.setPollNameServerInterval(1000);
        c.subscribe(topic, "*");
        Collector failing = Collector.concurrent(ctx, "failing", c, m -> false).start();
        failing.awaitTotal(keys.size() * 3, 90);
        String dlqTopic = "%DLQ%" + c.getConsumerGroup();
        DefaultMQPushConsumer d = ctx.pushConsumer("dlq-reader");
        d.setPollNameServerInterval(1000);
        d.subscribe(dlqTopic, "*");
        Collector dlq = Collector.concurrent(ctx, "dlq", d).start();
        dlq.expectExactly(keys, 60);
        for (String k : keys) {
            ctx.check(failing.count(k) == 3, "%s delivered %d times to the failing group, expected 3", k,
                failing.count(k));
        }
        for (Collector.Delivery x : failing.deliveries()) {
            ctx.check(x.reconsumeTimes() <= 2, "%s delivered with reconsumeTimes %d", x.key(), x.reconsumeTimes());
        }
        for (Collector.Delivery x : dlq.deliveries()) {
            ctx.check(x.msg().getTopic().equals(dlqTopic), "DLQ message %s on topic %s", x.key(), x.msg().getTopic());
        }
    }
}
