package basalt.interop;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/** Every way the producer sends, each checked by a consumer that gets each message exactly once. */
final class ProducerCases {
    static final int QUEUES = 4;
    /** Per-delay-level delays the broker is started with (messageDelayLevel "1s 2s ..."). */
    static final long[] LEVEL_MS = {0, 1000, 2000};

    private ProducerCases() {}

    static void register(Map<String, Main.Case> m) {
        m.put("sync", ProducerCases::sync);
        m.put("async", ProducerCases::async);
        m.put("oneway", ProducerCases::oneway);
        m.put("batch", ProducerCases::batch);
        m.put("ordered", ProducerCases::ordered);
        m.put("delay", ProducerCases::delay);
        m.put("transaction", ProducerCases::transaction);
        m.put("request-reply", ProducerCases::requestReply);
    }

    static Message msg(String topic, String tags, String key) {
        return new Message(topic, tags, key, ("body-" + key).getBytes(StandardCharsets.UTF_8));
    }

    static List<String> keys(Ctx ctx, int n) {
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            keys.add(ctx.name + "-" + i);
        }
        return keys;
    }

    /** Consumes {@code topic} from its start and expects exactly {@code keys}. */
    static Collector consumeExactly(Ctx ctx, String topic, List<String> keys) throws Exception {
        DefaultMQPushConsumer c = ctx.pushConsumer("c");
        c.subscribe(topic, "*");
        Collector col = Collector.concurrent(ctx, "c", c).start();
        col.expectExactly(keys, 60);
        return col;
    }

    static void sync(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        ctx.createTopic(p, topic, QUEUES, 1);
        List<String> keys = keys(ctx, 12);
        Map<String, String> ids = new ConcurrentHashMap<>();
        for (String k : keys) {
            SendResult r = p.send(msg(topic, "T", k));
            ctx.sent(k, r);
            ctx.check(r.getSendStatus() == SendStatus.SEND_OK, "send %s: %s", k, r);
            ids.put(k, r.getMsgId());
        }
        Collector col = consumeExactly(ctx, topic, keys);
        for (Collector.Delivery d : col.deliveries()) {
            ctx.check(ids.get(d.key()).equals(d.msgId()), "message %s arrived with id %s, sent as %s",
                d.key(), d.msgId(), ids.get(d.key()));
            ctx.check(new String(d.msg().getBody(), StandardCharsets.UTF_8).equals("body-" + d.key()),
                "message %s arrived with another body", d.key());
        }
    }

    static void async(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        ctx.createTopic(p, topic, QUEUES, 1);
        List<String> keys = keys(ctx, 12);
        CountDownLatch done = new CountDownLatch(keys.size());
        List<String> errors = new ArrayList<>();
        for (String k : keys) {
            p.send(msg(topic, "T", k), new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    ctx.sent(k, r);
                    if (r.getSendStatus() != SendStatus.SEND_OK) {
                        synchronized (errors) {
                            errors.add(k + ": " + r.getSendStatus());
                        }
                    }
                    done.countDown();
                }

                @Override
                public void onException(Throwable e) {
                    synchronized (errors) {
                        errors.add(k + ": " + e);
                    }
                    done.countDown();
                }
            });
        }
        ctx.await(done, 30, "async send callbacks");
        ctx.check(errors.isEmpty(), "async sends failed: %s", errors);
        consumeExactly(ctx, topic, keys);
    }

    static void oneway(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        ctx.createTopic(p, topic, QUEUES, 1);
        List<String> keys = keys(ctx, 12);
        for (String k : keys) {
            p.sendOneway(msg(topic, "T", k));
            ctx.log("SENT key=%s oneway", k);
        }
        consumeExactly(ctx, topic, keys);
    }

    static void batch(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        ctx.createTopic(p, topic, QUEUES, 1);
        List<String> keys = keys(ctx, 10);
        List<Message> batch = new ArrayList<>();
        for (String k : keys) {
            batch.add(msg(topic, "T", k));
        }
        SendResult r = p.send(batch);
        ctx.sent(String.join(",", keys), r);
        ctx.check(r.getSendStatus() == SendStatus.SEND_OK, "batch send: %s", r);
        String[] ids = r.getMsgId().split(",");
        ctx.check(ids.length == keys.size(), "batch of %d returned %d ids: %s", keys.size(), ids.length, r.getMsgId());
        Collector col = consumeExactly(ctx, topic, keys);
        for (Collector.Delivery d : col.deliveries()) {
            int i = keys.indexOf(d.key());
            ctx.check(d.queue().equals(r.getMessageQueue()), "batch message %s in %s, batch went to %s",
                d.key(), d.queue(), r.getMessageQueue());
            ctx.check(d.queueOffset() == r.getQueueOffset() + i, "batch message %d at offset %d, expected %d",
                i, d.queueOffset(), r.getQueueOffset() + i);
            ctx.check(ids[i].equals(d.msgId()), "batch message %d id %s, sent as %s", i, d.msgId(), ids[i]);
        }
    }

    /** MessageQueueSelector: each order's messages go to the queue it picks, in send order. */
    static void ordered(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        ctx.createTopic(p, topic, QUEUES, 1);
        List<String> keys = new ArrayList<>();
        Map<String, SendResult> results = new ConcurrentHashMap<>();
        for (int step = 0; step < 6; step++) {
            for (int order = 0; order < 3; order++) {
                String k = "o" + order + "-s" + step;
                SendResult r = p.send(msg(topic, "T", k),
                    (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size()), order);
                ctx.sent(k, r);
                ctx.check(r.getSendStatus() == SendStatus.SEND_OK, "send %s: %s", k, r);
                ctx.check(r.getMessageQueue().getQueueId() == order % QUEUES, "order %d sent to %s", order,
                    r.getMessageQueue());
                SendResult prev = results.get("o" + order + "-s" + (step - 1));
                ctx.check(prev == null || r.getQueueOffset() == prev.getQueueOffset() + 1,
                    "order %d step %d at offset %d after %s", order, step, r.getQueueOffset(), prev);
                results.put(k, r);
                keys.add(k);
            }
        }
        Collector col = consumeExactly(ctx, topic, keys);
        for (Collector.Delivery d : col.deliveries()) {
            SendResult r = results.get(d.key());
            ctx.check(d.queue().equals(r.getMessageQueue()) && d.queueOffset() == r.getQueueOffset(),
                "%s arrived from %s@%d, was sent to %s", d.key(), d.queue(), d.queueOffset(), Ctx.where(r));
        }
    }

    /** Delay levels 1 and 2 (1 s and 2 s on the test broker): never delivered early. */
    static void delay(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        ctx.createTopic(p, topic, QUEUES, 1);
        List<String> keys = new ArrayList<>();
        Map<String, long[]> sentAt = new ConcurrentHashMap<>();
        for (int level = 1; level <= 2; level++) {
            for (int i = 0; i < 4; i++) {
                String k = "L" + level + "-" + i;
                Message m = msg(topic, "T", k);
                m.setDelayTimeLevel(level);
                long before = System.currentTimeMillis();
                SendResult r = p.send(m);
                ctx.sent(k, r);
                ctx.check(r.getSendStatus() == SendStatus.SEND_OK, "send %s: %s", k, r);
                sentAt.put(k, new long[] {before, LEVEL_MS[level]});
                keys.add(k);
            }
        }
        Collector col = consumeExactly(ctx, topic, keys);
        for (Collector.Delivery d : col.deliveries()) {
            long[] s = sentAt.get(d.key());
            long waited = d.receivedAtMs() - s[0];
            ctx.log("%s delivered %d ms after its send (delay %d ms)", d.key(), waited, s[1]);
            ctx.check(waited >= s[1], "%s delivered %d ms after its send, before its %d ms delay", d.key(), waited,
                s[1]);
            ctx.check(d.msg().getTopic().equals(topic), "%s arrived on topic %s", d.key(), d.msg().getTopic());
        }
    }

    /**
     * Transactional sends: commit and rollback decided at once, and UNKNOW
     * first then COMMIT when the broker checks back. The consumer gets the
     * committed and the checked messages, never a rolled-back one.
     */
    static void transaction(Ctx ctx) throws Exception {
        String topic = ctx.topic("");
        DefaultMQProducer admin = ctx.producer("admin");
        ctx.createTopic(admin, topic, QUEUES, 1);
        Map<String, AtomicInteger> checks = new ConcurrentHashMap<>();
        TransactionMQProducer p = new TransactionMQProducer(ctx.group("tx"));
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message m, Object arg) {
                String k = m.getKeys();
                if (k.startsWith("commit")) {
                    return LocalTransactionState.COMMIT_MESSAGE;
                }
                if (k.startsWith("rollback")) {
                    return LocalTransactionState.ROLLBACK_MESSAGE;
                }
                return LocalTransactionState.UNKNOW;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt m) {
                String k = m.getKeys();
                checks.computeIfAbsent(k, x -> new AtomicInteger()).incrementAndGet();
                ctx.log("CHECK key=%s txid=%s", k, m.getTransactionId());
                return k.startsWith("rollback") ? LocalTransactionState.ROLLBACK_MESSAGE
                    : LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        ctx.startProducer(p);
        List<String> expected = new ArrayList<>();
        for (String kind : new String[] {"commit", "rollback", "check"}) {
            for (int i = 0; i < 3; i++) {
                String k = kind + "-" + i;
                TransactionSendResult r = p.sendMessageInTransaction(msg(topic, "T", k), null);
                ctx.log("SENT key=%s id=%s status=%s local=%s", k, r.getMsgId(), r.getSendStatus(),
                    r.getLocalTransactionState());
                ctx.check(r.getSendStatus() == SendStatus.SEND_OK, "half message %s: %s", k, r);
                if (!kind.equals("rollback")) {
                    expected.add(k);
                }
            }
        }
        consumeExactly(ctx, topic, expected);
        for (int i = 0; i < 3; i++) {
            AtomicInteger n = checks.get("check-" + i);
            ctx.check(n != null && n.get() >= 1, "the broker never checked back check-%d", i);
        }
        ctx.log("check-backs per key: %s", checks);
    }

    /** DefaultMQProducer.request, answered by a consumer with MessageUtil.createReplyMessage. */
    static void requestReply(Ctx ctx) throws Exception {
        String topic = ctx.topic("");
        DefaultMQProducer requester = ctx.producer("req");
        ctx.createTopic(requester, topic, QUEUES, 1);
        DefaultMQProducer replier = ctx.producer("rep");
        DefaultMQPushConsumer c = ctx.pushConsumer("responder");
        c.subscribe(topic, "*");
        List<String> errors = new ArrayList<>();
        Collector col = Collector.concurrent(ctx, "responder", c, m -> {
            try {
                Message reply = MessageUtil.createReplyMessage(m,
                    ("reply:" + new String(m.getBody(), StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8));
                SendResult r = replier.send(reply);
                ctx.log("REPLIED key=%s reply-topic=%s status=%s", m.getKeys(), reply.getTopic(), r.getSendStatus());
            } catch (Exception e) {
                synchronized (errors) {
                    errors.add(m.getKeys() + ": " + e);
                }
            }
            return true;
        }).start();
        ctx.eventually(30, "the responder to hold all queues", () -> col.heldQueues(topic).size() == QUEUES);
        List<String> keys = keys(ctx, 4);
        for (String k : keys) {
            Message reply = requester.request(msg(topic, "T", k), 15_000);
            String body = reply == null ? null : new String(reply.getBody(), StandardCharsets.UTF_8);
            ctx.log("REPLY key=%s body=%s", k, body);
            ctx.check(("reply:body-" + k).equals(body), "request %s got reply %s (responder errors %s)", k, body,
                errors);
        }
        Thread.sleep(Collector.SETTLE_MS);
        col.checkExactly(keys);
        ctx.check(errors.isEmpty(), "replies failed: %s", errors);
    }
}
