package basalt.interop;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;

/** What differs between the client versions' APIs (the 5.x side). */
final class Compat {
    private Compat() {}

    /** Makes `c` a BROADCASTING consumer (MessageModel moved package in 5.0). */
    static void broadcasting(DefaultMQPushConsumer c) {
        c.setMessageModel(MessageModel.BROADCASTING);
    }

    /** UPDATE_AND_CREATE_TOPIC on every broker of {@code key}'s route (5.x adds topic attributes). */
    static void createTopic(DefaultMQProducer p, String key, String topic, int queues) throws Exception {
        p.createTopic(key, topic, queues, new java.util.HashMap<>());
    }
}
