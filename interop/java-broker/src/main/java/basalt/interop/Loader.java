package basalt.interop;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.body.SubscriptionGroupWrapper;
import org.apache.rocketmq.remoting.protocol.body.TopicConfigSerializeWrapper;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Writes and reads the content of a store through the Java client, so the
 * migration tests can compare what one broker served before a migration
 * with what the other serves after it. Every line it prints is
 * tab-separated and starts with its kind (SENT, MSG, QUEUE, OFFSET, GOT,
 * TOPIC, GROUP); the Rust test parses them.
 *
 * <pre>
 * setup   NAMESRV BROKER            topics MigA/MigB/MigRO/MigDelay + group MigGroup
 * produce NAMESRV                   the messages (see below), prints SENT lines
 * delay   NAMESRV                   three level-4 (30 s) messages to MigDelay
 * timer   NAMESRV TOPIC EARLY LATE  setDeliverTimeMs timers to TOPIC: 2 due in
 *                                   EARLY ms, 3 in LATE ms (TIMER lines)
 * lock-ro NAMESRV BROKER            MigRO becomes read-only (perm 4)
 * commit  NAMESRV GROUP TOPIC N     pulls the first N of each queue, commits N
 * read    NAMESRV TOPIC...          every message of every queue (MSG, QUEUE)
 * offsets NAMESRV GROUP TOPIC...    the group's committed offsets (OFFSET)
 * resume  NAMESRV GROUP TOPIC N SECS  subscribes as GROUP, prints GOT until N
 * meta    NAMESRV BROKER            topic and group settings (TOPIC, GROUP)
 * wait    NAMESRV TOPIC N SECS      reads TOPIC until it holds N messages
 * </pre>
 */
public final class Loader {
    static final String[] TOPICS = {"MigA", "MigB", "MigRO", "MigDelay"};

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable t) {
            // The client's threads are not daemons: exit, or the JVM stays.
            t.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    static void run(String[] args) throws Exception {
        String cmd = args[0];
        switch (cmd) {
            case "setup": setup(args[1], args[2]); break;
            case "produce": produce(args[1]); break;
            case "delay": delay(args[1]); break;
            case "timer": timer(args[1], args[2], Long.parseLong(args[3]), Long.parseLong(args[4])); break;
            case "lock-ro": lockReadOnly(args[1], args[2]); break;
            case "commit": commit(args[1], args[2], args[3], Integer.parseInt(args[4])); break;
            case "read": read(args[1], List.of(args).subList(2, args.length)); break;
            case "offsets": offsets(args[1], args[2], List.of(args).subList(3, args.length)); break;
            case "resume": resume(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5])); break;
            case "meta": meta(args[1], args[2]); break;
            case "wait": waitFor(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4])); break;
            default: throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    static DefaultMQAdminExt admin(String namesrv) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt("MigAdmin" + System.nanoTime());
        admin.setNamesrvAddr(namesrv);
        admin.start();
        return admin;
    }

    static TopicConfig topic(String name, int read, int write, int perm) {
        TopicConfig tc = new TopicConfig(name, read, write, perm);
        return tc;
    }

    static void setup(String namesrv, String broker) throws Exception {
        DefaultMQAdminExt admin = admin(namesrv);
        TopicConfig a = topic("MigA", 4, 4, 6);
        Map<String, String> attrs = new HashMap<>();
        attrs.put("+message.type", "NORMAL");
        a.setAttributes(attrs);
        admin.createAndUpdateTopicConfig(broker, a);
        admin.createAndUpdateTopicConfig(broker, topic("MigB", 8, 6, 6));
        admin.createAndUpdateTopicConfig(broker, topic("MigRO", 2, 2, 6));
        admin.createAndUpdateTopicConfig(broker, topic("MigDelay", 2, 2, 6));
        SubscriptionGroupConfig g = new SubscriptionGroupConfig();
        g.setGroupName("MigGroup");
        g.setRetryMaxTimes(3);
        g.setConsumeBroadcastEnable(false);
        g.setRetryQueueNums(1);
        admin.createAndUpdateSubscriptionGroupConfig(broker, g);
        admin.shutdown();
        System.out.println("SETUP\tok");
    }

    static void lockReadOnly(String namesrv, String broker) throws Exception {
        DefaultMQAdminExt admin = admin(namesrv);
        admin.createAndUpdateTopicConfig(broker, topic("MigRO", 2, 2, 4));
        admin.shutdown();
        System.out.println("LOCKED\tMigRO");
    }

    static DefaultMQProducer producer(String namesrv) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("MigProducer");
        p.setNamesrvAddr(namesrv);
        p.setSendMsgTimeout(10000);
        p.setRetryTimesWhenSendFailed(0);
        p.start();
        return p;
    }

    /** One message: two keys, a tag, user properties, a text body. */
    static Message message(String topic, int i) {
        Message m = new Message(topic, "tag" + (i % 3), "k-" + topic + "-" + i + " kk-" + i,
            ("body-" + topic + "-" + i).getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("idx", Integer.toString(i));
        m.putUserProperty("origin", "migration-test");
        return m;
    }

    /**
     * Sends {@code m} to queue {@code queueId % queues}. A topic that
     * {@code setup} just created on the Java broker reaches its NameServer
     * only when the broker registers the change, in the background: a send
     * right after may find no route (seen once: "No route info for this
     * topic, MigDelay", 9 s after the broker's boot). The send is tried
     * again, for up to 60 s, until the route is there.
     */
    static SendResult sendToQueue(DefaultMQProducer p, Message m, int queueId) throws Exception {
        long deadline = System.currentTimeMillis() + 60_000;
        while (true) {
            try {
                return p.send(m, (mqs, msg, arg) -> mqs.get((Integer) arg % mqs.size()), queueId);
            } catch (org.apache.rocketmq.client.exception.MQClientException e) {
                String what = String.valueOf(e.getMessage());
                if (!what.contains("No route info") || System.currentTimeMillis() > deadline) {
                    throw e;
                }
                Thread.sleep(500);
            }
        }
    }

    static void send(DefaultMQProducer p, Message m, int queueId) throws Exception {
        SendResult r = sendToQueue(p, m, queueId);
        if (r.getSendStatus() != SendStatus.SEND_OK) {
            throw new IllegalStateException("send " + m + ": " + r);
        }
        MessageQueue q = r.getMessageQueue();
        System.out.println(String.join("\t", "SENT", q.getTopic(), Integer.toString(q.getQueueId()),
            Long.toString(r.getQueueOffset()), r.getMsgId(), m.getTags(), m.getKeys(),
            props(m.getProperties(), true), new String(m.getBody(), StandardCharsets.UTF_8)));
    }

    static void produce(String namesrv) throws Exception {
        DefaultMQProducer p = producer(namesrv);
        int[][] plan = {{0, 24, 4}, {1, 24, 6}, {2, 6, 2}, {3, 2, 2}};
        for (int[] t : plan) {
            for (int i = 0; i < t[1]; i++) {
                send(p, message(TOPICS[t[0]], i), i % t[2]);
            }
        }
        p.shutdown();
    }

    static void delay(String namesrv) throws Exception {
        DefaultMQProducer p = producer(namesrv);
        for (int i = 0; i < 3; i++) {
            Message m = message("MigDelay", 100 + i);
            m.setDelayTimeLevel(4);
            SendResult r = sendToQueue(p, m, i);
            if (r.getSendStatus() != SendStatus.SEND_OK) {
                throw new IllegalStateException("send delayed: " + r);
            }
            System.out.println(String.join("\t", "DELAYED", "MigDelay", Integer.toString(r.getMessageQueue().getQueueId()),
                r.getMsgId(), m.getTags(), m.getKeys(), props(m.getProperties(), true),
                new String(m.getBody(), StandardCharsets.UTF_8), Long.toString(System.currentTimeMillis())));
        }
        p.shutdown();
    }

    /** Timer messages (RocketMQ 5's timer wheel): prints TIMER lines with
     * the delivery time asked for. */
    static void timer(String namesrv, String topic, long early, long late) throws Exception {
        DefaultMQProducer p = producer(namesrv);
        for (int i = 0; i < 5; i++) {
            Message m = message(topic, 200 + i);
            long at = System.currentTimeMillis() + (i < 2 ? early : late);
            m.setDeliverTimeMs(at);
            SendResult r = p.send(m);
            if (r.getSendStatus() != SendStatus.SEND_OK) {
                throw new IllegalStateException("send timer: " + r);
            }
            System.out.println(String.join("\t", "TIMER", topic, r.getMsgId(), Long.toString(at),
                new String(m.getBody(), StandardCharsets.UTF_8)));
        }
        p.shutdown();
    }

    static final java.util.Set<String> SYSTEM = new TreeSet<>(List.of(
        MessageConst.PROPERTY_KEYS, MessageConst.PROPERTY_TAGS, MessageConst.PROPERTY_WAIT_STORE_MSG_OK,
        MessageConst.PROPERTY_DELAY_TIME_LEVEL, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        MessageConst.PROPERTY_CLUSTER, MessageConst.PROPERTY_MIN_OFFSET, MessageConst.PROPERTY_MAX_OFFSET,
        MessageConst.PROPERTY_REAL_TOPIC, MessageConst.PROPERTY_REAL_QUEUE_ID, "__CRC32#"));

    /** Properties sorted by key as k=v;k=v; only the user's with {@code userOnly}. */
    static String props(Map<String, String> p, boolean userOnly) {
        StringBuilder b = new StringBuilder();
        for (Map.Entry<String, String> e : new TreeMap<>(p).entrySet()) {
            String k = e.getKey();
            if (userOnly ? SYSTEM.contains(k) : k.equals(MessageConst.PROPERTY_MIN_OFFSET)
                || k.equals(MessageConst.PROPERTY_MAX_OFFSET)) {
                continue;
            }
            if (b.length() > 0) {
                b.append(';');
            }
            b.append(k).append('=').append(e.getValue());
        }
        return b.toString();
    }

    static DefaultMQPullConsumer puller(String namesrv, String group) throws Exception {
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.start();
        return c;
    }

    /**
     * The topic's queues. A broker that just started may not have
     * registered with its NameServer yet: the route is asked for again for
     * up to 60 s.
     */
    static List<MessageQueue> queues(DefaultMQPullConsumer c, String topic) throws Exception {
        long deadline = System.currentTimeMillis() + 60_000;
        while (true) {
            try {
                List<MessageQueue> qs = new ArrayList<>(c.fetchSubscribeMessageQueues(topic));
                qs.sort(null);
                return qs;
            } catch (org.apache.rocketmq.client.exception.MQClientException e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
                Thread.sleep(500);
            }
        }
    }

    /** Every message of the queue from its min offset, in order. */
    static List<MessageExt> readQueue(DefaultMQPullConsumer c, MessageQueue mq, long from, long to) throws Exception {
        List<MessageExt> out = new ArrayList<>();
        long off = from;
        while (off < to) {
            PullResult r = c.pull(mq, "*", off, 32, 10000);
            if (r.getPullStatus() != PullStatus.FOUND) {
                throw new IllegalStateException("pull " + mq + " at " + off + ": " + r);
            }
            for (MessageExt m : r.getMsgFoundList()) {
                if (m.getQueueOffset() < to) {
                    out.add(m);
                }
            }
            off = r.getNextBeginOffset();
        }
        return out;
    }

    static void printMsg(String kind, MessageExt m) {
        System.out.println(String.join("\t", kind, m.getTopic(), Integer.toString(m.getQueueId()),
            Long.toString(m.getQueueOffset()), offsetMsgId(m), String.valueOf(m.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)),
            String.valueOf(m.getTags()), String.valueOf(m.getKeys()), Long.toString(m.getBornTimestamp()),
            Long.toString(m.getStoreTimestamp()), m.getBornHost() + "|" + m.getStoreHost(), Integer.toString(m.getSysFlag()),
            Integer.toString(m.getReconsumeTimes()), Integer.toString(m.getFlag()),
            props(m.getProperties(), false), new String(m.getBody(), StandardCharsets.UTF_8)));
    }

    /** The id that encodes the store host and CommitLog offset. */
    static String offsetMsgId(MessageExt m) {
        if (m instanceof MessageClientExt) {
            return ((MessageClientExt) m).getOffsetMsgId();
        }
        return m.getMsgId();
    }

    static void read(String namesrv, Collection<String> topics) throws Exception {
        DefaultMQPullConsumer c = puller(namesrv, "MigReader");
        for (String topic : topics) {
            for (MessageQueue mq : queues(c, topic)) {
                long min = c.minOffset(mq);
                long max = c.maxOffset(mq);
                System.out.println(String.join("\t", "QUEUE", topic, Integer.toString(mq.getQueueId()),
                    Long.toString(min), Long.toString(max)));
                for (MessageExt m : readQueue(c, mq, min, max)) {
                    printMsg("MSG", m);
                }
            }
        }
        c.shutdown();
    }

    static void commit(String namesrv, String group, String topic, int n) throws Exception {
        DefaultMQPullConsumer c = puller(namesrv, group);
        for (MessageQueue mq : queues(c, topic)) {
            long max = c.maxOffset(mq);
            long to = Math.min(n, max);
            List<MessageExt> got = readQueue(c, mq, 0, to);
            // Straight to the broker: a pull consumer's shutdown persists
            // only the queues its rebalance holds, and it holds none.
            c.getOffsetStore().updateConsumeOffsetToBroker(mq, to, false);
            System.out.println(String.join("\t", "COMMIT", topic, Integer.toString(mq.getQueueId()),
                Long.toString(to), Integer.toString(got.size())));
        }
        c.shutdown();
    }

    static void offsets(String namesrv, String group, Collection<String> topics) throws Exception {
        DefaultMQPullConsumer c = puller(namesrv, group);
        for (String topic : topics) {
            for (MessageQueue mq : queues(c, topic)) {
                System.out.println(String.join("\t", "OFFSET", topic, Integer.toString(mq.getQueueId()),
                    Long.toString(c.fetchConsumeOffset(mq, true))));
            }
        }
        c.shutdown();
    }

    static void resume(String namesrv, String group, String topic, int n, int secs) throws Exception {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        c.setAutoCommit(false);
        c.subscribe(topic, "*");
        c.start();
        long deadline = System.currentTimeMillis() + secs * 1000L;
        int got = 0;
        while (got < n && System.currentTimeMillis() < deadline) {
            for (MessageExt m : c.poll(1000)) {
                printMsg("GOT", m);
                got++;
            }
        }
        // Let a few more polls show that nothing beyond n arrives.
        long quiet = System.currentTimeMillis() + 2000;
        while (System.currentTimeMillis() < quiet) {
            for (MessageExt m : c.poll(500)) {
                printMsg("GOT", m);
            }
        }
        c.shutdown();
    }

    static void meta(String namesrv, String broker) throws Exception {
        DefaultMQAdminExt admin = admin(namesrv);
        TopicConfigSerializeWrapper topics = admin.getAllTopicConfig(broker, 10000);
        for (TopicConfig t : new TreeMap<>(topics.getTopicConfigTable()).values()) {
            System.out.println(String.join("\t", "TOPIC", t.getTopicName(), Integer.toString(t.getReadQueueNums()),
                Integer.toString(t.getWriteQueueNums()), Integer.toString(t.getPerm()),
                String.valueOf(t.isOrder()), new TreeMap<>(t.getAttributes()).toString()));
        }
        SubscriptionGroupWrapper groups = admin.getAllSubscriptionGroup(broker, 10000);
        for (SubscriptionGroupConfig g : new TreeMap<>(groups.getSubscriptionGroupTable()).values()) {
            System.out.println(String.join("\t", "GROUP", g.getGroupName(), Integer.toString(g.getRetryMaxTimes()),
                Integer.toString(g.getRetryQueueNums()), String.valueOf(g.isConsumeBroadcastEnable()),
                String.valueOf(g.isConsumeEnable())));
        }
        admin.shutdown();
    }

    static void waitFor(String namesrv, String topic, int n, int secs) throws Exception {
        DefaultMQPullConsumer c = puller(namesrv, "MigWaiter");
        long deadline = System.currentTimeMillis() + secs * 1000L;
        while (true) {
            long total = 0;
            List<MessageQueue> qs = queues(c, topic);
            for (MessageQueue mq : qs) {
                total += c.maxOffset(mq) - c.minOffset(mq);
            }
            if (total >= n || System.currentTimeMillis() > deadline) {
                System.out.println("WAITED\t" + topic + "\t" + total);
                for (MessageQueue mq : qs) {
                    for (MessageExt m : readQueue(c, mq, c.minOffset(mq), c.maxOffset(mq))) {
                        printMsg("MSG", m);
                    }
                }
                break;
            }
            Thread.sleep(1000);
        }
        c.shutdown();
    }
}
