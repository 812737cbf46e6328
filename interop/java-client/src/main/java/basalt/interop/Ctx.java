package basalt.interop;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * One case's names, output and clients. Topic and group names carry the
 * run's prefix and the case's name, so cases never share one. Every client
 * made here has its own instance name (its own MQClientInstance) and is shut
 * down by {@link #close}.
 */
public final class Ctx {
    /** The broker's topic that new topics are created from. */
    static final String TEMPLATE_TOPIC = "TBW102";

    final String name;
    final String namesrv;
    final String prefix;
    private final List<Runnable> shutdowns = new ArrayList<>();
    private int clients;

    Ctx(String name, String namesrv, String prefix) {
        this.name = name;
        this.namesrv = namesrv;
        this.prefix = prefix;
    }

    private static final long STARTED = System.nanoTime();

    /** Prints one line, after the seconds since start (whole lines only, from any thread). */
    static synchronized void out(String line) {
        System.out.printf("%7.3f %s%n", (System.nanoTime() - STARTED) / 1e9, line);
        System.out.flush();
    }

    void log(String fmt, Object... args) {
        out("[" + name + "] " + String.format(fmt, args));
    }

    String topic(String suffix) {
        return prefix + "_" + name + (suffix.isEmpty() ? "" : "_" + suffix);
    }

    String group(String suffix) {
        return "G_" + topic(suffix);
    }

    /** Fails the case with a reason unless {@code ok}. */
    void check(boolean ok, String fmt, Object... args) throws CaseFailed {
        if (!ok) {
            throw new CaseFailed(name + ": " + String.format(fmt, args));
        }
    }

    /** Waits (bounded) for a latch; fails the case with {@code what} otherwise. */
    void await(CountDownLatch latch, long seconds, String what) throws Exception {
        check(latch.await(seconds, TimeUnit.SECONDS), "timed out after %d s waiting for %s (%d left)",
            seconds, what, latch.getCount());
    }

    /** Polls {@code cond} every 100 ms for up to {@code seconds}. */
    void eventually(long seconds, String what, BooleanSupplier cond) throws Exception {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!cond.getAsBoolean()) {
            check(System.nanoTime() < end, "timed out after %d s waiting for %s", seconds, what);
            Thread.sleep(100);
        }
    }

    /** A unique instance name, so each client has its own MQClientInstance. */
    synchronized String instance(String who) {
        clients++;
        return name + "-" + who + "-" + clients;
    }

    /** Registers a shutdown to run at {@link #close} (latest first). */
    synchronized void onClose(Runnable r) {
        shutdowns.add(0, r);
    }

    /** Shuts every client of the case down. */
    synchronized void close() {
        for (Runnable r : shutdowns) {
            try {
                r.run();
            } catch (RuntimeException e) {
                log("shutdown: %s", e);
            }
        }
        shutdowns.clear();
    }

    /** A started producer of group {@code group(suffix)}. */
    DefaultMQProducer producer(String suffix) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group(suffix));
        return startProducer(p);
    }

    DefaultMQProducer startProducer(DefaultMQProducer p) throws Exception {
        p.setNamesrvAddr(namesrv);
        p.setInstanceName(instance("producer"));
        p.start();
        onClose(p::shutdown);
        return p;
    }

    /** A push consumer (not started) with names, instance and its shutdown set. */
    DefaultMQPushConsumer pushConsumer(String groupSuffix) {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group(groupSuffix));
        prepare(c);
        return c;
    }

    void prepare(DefaultMQPushConsumer c) {
        c.setNamesrvAddr(namesrv);
        // The 5.x client raises its subscription version after each
        // rebalance and sends a heartbeat, but skips that heartbeat when the
        // periodic one holds the lock (both run about 1 s after start); its
        // pulls then get SUBSCRIPTION_NOT_LATEST (from Java's broker too)
        // until the next periodic heartbeat, 30 s by default. 5 s bounds
        // that stall (docs/java-client.md).
        c.setHeartbeatBrokerInterval(5000);
        c.setInstanceName(instance("consumer"));
        c.setConsumeFromWhere(org.apache.rocketmq.common.consumer.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        onClose(c::shutdown);
    }

    /**
     * Creates {@code topic} with {@code queues} queues on every broker of the
     * template topic's route (UPDATE_AND_CREATE_TOPIC), then waits until the
     * NameServer routes {@code queues * brokers} write queues for it.
     */
    List<MessageQueue> createTopic(DefaultMQProducer p, String topic, int queues, int brokers) throws Exception {
        Compat.createTopic(p, TEMPLATE_TOPIC, topic, queues);
        int want = queues * brokers;
        List<MessageQueue> found = new ArrayList<>();
        eventually(20, "a route of " + want + " queues for " + topic, () -> {
            try {
                found.clear();
                found.addAll(p.fetchPublishMessageQueues(topic));
                return found.size() >= want;
            } catch (Exception e) {
                return false;
            }
        });
        log("created topic %s: %s", topic, queuesText(found));
        return found;
    }

    static String queuesText(Collection<MessageQueue> qs) {
        Set<String> s = new TreeSet<>();
        for (MessageQueue q : qs) {
            s.add(q.getBrokerName() + "/" + q.getQueueId());
        }
        return s.toString();
    }

    static String where(SendResult r) {
        MessageQueue q = r.getMessageQueue();
        return q.getBrokerName() + "/" + q.getQueueId() + "@" + r.getQueueOffset();
    }

    static String where(MessageExt m) {
        return m.getBrokerName() + "/" + m.getQueueId() + "@" + m.getQueueOffset();
    }

    void sent(String key, SendResult r) {
        log("SENT key=%s id=%s status=%s at=%s", key, r.getMsgId(), r.getSendStatus(), where(r));
    }
}
