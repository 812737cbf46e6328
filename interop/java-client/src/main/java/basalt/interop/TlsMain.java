package basalt.interop;

import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Sends and consumes over TLS with the official client's own switch
 * ({@code setUseTLS(true)}; trust as the client decides it from its
 * {@code tls.*} system properties, by default its test mode, which takes any
 * server certificate). Usage: {@code TlsMain NAMESRV TOPIC COUNT}. Prints
 * {@code TLS PASSED sent=N received=N} and exits 0 when every message sent
 * with SEND_OK came back exactly once within the deadline, else exits 1
 * with the reason.
 */
public final class TlsMain {
    private static final long DEADLINE_SEC = 90;

    private TlsMain() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: TlsMain NAMESRV TOPIC COUNT");
            System.exit(2);
        }
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);

        DefaultMQProducer producer = new DefaultMQProducer("tls_producer_" + topic);
        producer.setNamesrvAddr(namesrv);
        producer.setUseTLS(true);
        producer.setSendMsgTimeout(10_000);
        producer.start();
        for (int i = 0; i < count; i++) {
            Message m = new Message(topic, ("tls-" + i).getBytes(StandardCharsets.UTF_8));
            SendResult r = producer.send(m);
            if (r.getSendStatus() != SendStatus.SEND_OK) {
                fail("send " + i + ": " + r.getSendStatus());
            }
            System.out.println("sent tls-" + i + " " + r.getMsgId());
        }
        producer.shutdown();

        Set<String> received = ConcurrentHashMap.newKeySet();
        Set<String> duplicates = ConcurrentHashMap.newKeySet();
        CountDownLatch all = new CountDownLatch(count);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("tls_consumer_" + topic);
        consumer.setNamesrvAddr(namesrv);
        consumer.setUseTLS(true);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                if (received.add(body)) {
                    System.out.println("received " + body);
                    all.countDown();
                } else {
                    duplicates.add(body);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        boolean done = all.await(DEADLINE_SEC, TimeUnit.SECONDS);
        consumer.shutdown();
        if (!done) {
            fail("received " + received.size() + " of " + count + " within " + DEADLINE_SEC + " s");
        }
        System.out.println("TLS PASSED sent=" + count + " received=" + received.size()
            + " redelivered=" + duplicates.size());
        System.exit(0);
    }

    private static void fail(String why) {
        System.out.println("TLS FAILED: " + why);
        System.exit(1);
    }
}
