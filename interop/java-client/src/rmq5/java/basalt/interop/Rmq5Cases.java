package basalt.interop;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/** Cases that need API only the 5.x client has; Main registers them by reflection. */
public final class Rmq5Cases {
    /** The broker's timer precision (timerPrecisionMs, 1000 by default). */
    static final long TIMER_PRECISION_MS = 1000;

    private Rmq5Cases() {}

    public static void register(Map<String, Main.Case> m) {
        m.put("timer", Rmq5Cases::timer);
        m.put("heartbeat-v2", Rmq5Cases::heartbeatV2);
        m.put("pop", PopCase::run); // PopCase.java: POP through MQClientAPIImpl
        m.put("pop-push", PopPushCase::run); // PopPushCase.java: the POP push consumer
    }

    /**
     * Message.setDeliverTimeMs (the TIMER_DELIVER_MS property): each message
     * is delivered once, not before its time less the timer's precision
     * (the wheel rounds a delivery time down to its slot).
     */
    static void timer(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        ctx.createTopic(p, topic, 4, 1);
        List<String> keys = new ArrayList<>();
        Map<String, Long> due = new ConcurrentHashMap<>();
        for (int i = 0; i < 6; i++) {
            String k = ctx.name + "-" + i;
            Message m = ProducerCases.msg(topic, "T", k);
            long at = System.currentTimeMillis() + 2000 + 500L * i;
            m.setDeliverTimeMs(at);
            SendResult r = p.send(m);
            ctx.sent(k, r);
            ctx.check(r.getSendStatus() == SendStatus.SEND_OK, "send %s: %s", k, r);
            due.put(k, at);
            keys.add(k);
        }
        Collector col = ProducerCases.consumeExactly(ctx, topic, keys);
        for (Collector.Delivery d : col.deliveries()) {
            long early = due.get(d.key()) - d.receivedAtMs();
            ctx.log("%s delivered %d ms after its deliver time", d.key(), -early);
            ctx.check(early < TIMER_PRECISION_MS, "%s delivered %d ms before its deliver time", d.key(), early);
            ctx.check(d.msg().getTopic().equals(topic), "%s arrived on topic %s", d.key(), d.msg().getTopic());
        }
    }

    /**
     * useHeartbeatV2 (off by default in 5.x): the client sends its full
     * heartbeat until a broker answers IS_SUPPORT_HEART_BEAT_V2, then only
     * fingerprints. Basalt does not answer it, so the client must keep full
     * heartbeats: two consumers of a group split the queues and each
     * message arrives once.
     */
    static void heartbeatV2(Ctx ctx) throws Exception {
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        ctx.createTopic(p, topic, 4, 1);
        List<Collector> cols = new ArrayList<>();
        for (String who : new String[] {"A", "B"}) {
            DefaultMQPushConsumer c = ctx.pushConsumer("g");
            c.setUseHeartbeatV2(true);
            c.subscribe(topic, "*");
            cols.add(Collector.concurrent(ctx, who, c).start());
        }
        ctx.eventually(60, "A and B to split the queues 2 + 2",
            () -> cols.get(0).heldQueues(topic).size() == 2 && cols.get(1).heldQueues(topic).size() == 2);
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            String k = ctx.name + "-" + i;
            ConsumerCases.send(ctx, p, ProducerCases.msg(topic, "T", k));
            keys.add(k);
        }
        ctx.eventually(60, "16 deliveries", () -> cols.get(0).total() + cols.get(1).total() >= keys.size());
        Thread.sleep(Collector.SETTLE_MS);
        for (String k : keys) {
            int n = cols.get(0).count(k) + cols.get(1).count(k);
            ctx.check(n == 1, "%s delivered %d times across A and B", k, n);
        }
        ctx.check(cols.get(0).total() + cols.get(1).total() == keys.size(), "A got %d, B got %d of %d",
            cols.get(0).total(), cols.get(1).total(), keys.size());
        ctx.log("16 messages, each once across A (%d) and B (%d)", cols.get(0).total(), cols.get(1).total());
    }
}
