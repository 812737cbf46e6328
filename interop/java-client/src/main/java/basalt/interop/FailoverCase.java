package basalt.interop;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Sends fail over to a second broker group. Two brokers of different broker
 * names share one NameServer; the topic has queues on both. After a first
 * batch reaches both, the test harness kills the broker named by
 * {@code -Dfailover.victim} (handshake through files in
 * {@code -Dfailover.sync}: this case writes {@code phase1}, waits for
 * {@code killed}). Every later synchronous send must still succeed, on the
 * survivor, through the producer's own retry on another broker; a consumer
 * then reads exactly the messages stored on the survivor.
 */
final class FailoverCase {
    static final int QUEUES = 2;

    private FailoverCase() {}

    static void run(Ctx ctx) throws Exception {
        Path sync = Path.of(System.getProperty("failover.sync", ""));
        String victim = System.getProperty("failover.victim", "");
        ctx.check(Files.isDirectory(sync) && !victim.isEmpty(),
            "failover needs -Dfailover.sync=DIR and -Dfailover.victim=BROKER_NAME");
        DefaultMQProducer p = ctx.producer("p");
        String topic = ctx.topic("");
        List<MessageQueue> mqs = ctx.createTopic(p, topic, QUEUES, 2);
        Set<String> brokers = new TreeSet<>();
        mqs.forEach(q -> brokers.add(q.getBrokerName()));
        ctx.check(brokers.size() == 2 && brokers.contains(victim), "topic route spans %s, victim %s", brokers, victim);

        Map<String, SendResult> sent = new TreeMap<>();
        Set<String> used = new TreeSet<>();
        for (int i = 0; i < 12; i++) {
            String k = "before-" + i;
            SendResult r = ConsumerCases.send(ctx, p, ProducerCases.msg(topic, "T", k));
            used.add(r.getMessageQueue().getBrokerName());
            sent.put(k, r);
        }
        ctx.check(used.equals(brokers), "the first batch should reach both brokers, reached %s", used);

        Files.writeString(sync.resolve("phase1"), "sent");
        ctx.log("waiting for the harness to kill %s", victim);
        ctx.eventually(60, "the harness to kill " + victim, () -> Files.exists(sync.resolve("killed")));

        List<String> failures = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            String k = "after-" + i;
            try {
                SendResult r = p.send(ProducerCases.msg(topic, "T", k));
                ctx.sent(k, r);
                if (r.getSendStatus() != SendStatus.SEND_OK
                    || r.getMessageQueue().getBrokerName().equals(victim)) {
                    failures.add(k + ": " + r);
                }
                sent.put(k, r);
            } catch (Exception e) {
                ctx.log("SEND FAILED key=%s: %s", k, e);
                failures.add(k + ": " + e);
            }
        }
        ctx.check(failures.isEmpty(), "sends after %s died must succeed on the survivor; failed: %s", victim,
            failures);

        List<String> onSurvivor = new ArrayList<>();
        sent.forEach((k, r) -> {
            if (!r.getMessageQueue().getBrokerName().equals(victim)) {
                onSurvivor.add(k);
            }
        });
        DefaultMQPushConsumer c = ctx.pushConsumer("c");
        c.subscribe(topic, "*");
        Collector.concurrent(ctx, "c", c).start().expectExactly(onSurvivor, 60);
    }
}
