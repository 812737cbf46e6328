package basalt.interop;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs conformance cases of the official RocketMQ Java client against a
 * broker. Usage: {@code Main NAMESRV PREFIX CASE [CASE...]}.
 *
 * <p>PREFIX makes every topic and group name of the run unique. The cases run
 * in parallel threads, each bounded in time; each prints what it sent and
 * what it received, one line per message, and checks the counts exactly.
 * The process exits 0 only when every case passed, else 1 with one FAIL line
 * per case that did not.
 */
public final class Main {
    /** How long one case may take before it counts as failed. */
    static final long CASE_DEADLINE_SEC = Long.getLong("case.deadline.sec", 150);

    private Main() {}

    /** The cases this build offers, by name. */
    static Map<String, Case> registry() {
        Map<String, Case> m = new LinkedHashMap<>();
        ProducerCases.register(m);
        ConsumerCases.register(m);
        BehaviourCases.register(m);
        m.put("failover", FailoverCase::run);
        // Cases that need 5.x-only API live in src/rmq5/java, compiled only
        // into the 5.x build.
        try {
            Class<?> extra = Class.forName("basalt.interop.Rmq5Cases");
            extra.getMethod("register", Map.class).invoke(null, m);
        } catch (ClassNotFoundException e) {
            // the 4.x build
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("Rmq5Cases.register", e);
        }
        return m;
    }

    public static void main(String[] args) {
        if (args.length < 3) {
            System.err.println("usage: Main NAMESRV PREFIX CASE [CASE...]");
            System.exit(2);
        }
        String namesrv = args[0];
        String prefix = args[1];
        Map<String, Case> all = registry();
        List<String> names = new ArrayList<>();
        for (int i = 2; i < args.length; i++) {
            if (!all.containsKey(args[i])) {
                System.err.println("unknown case " + args[i] + "; this build has " + all.keySet());
                System.exit(2);
            }
            names.add(args[i]);
        }
        Ctx.out("client version " + org.apache.rocketmq.common.MQVersion.getVersionDesc(
            org.apache.rocketmq.common.MQVersion.CURRENT_VERSION) + ", namesrv " + namesrv);
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        Map<String, Future<?>> running = new LinkedHashMap<>();
        for (String name : names) {
            Ctx ctx = new Ctx(name, namesrv, prefix);
            running.put(name, pool.submit(() -> {
                ctx.log("start");
                all.get(name).run(ctx);
                ctx.close();
                return null;
            }));
        }
        List<String> failures = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(CASE_DEADLINE_SEC);
        for (Map.Entry<String, Future<?>> e : running.entrySet()) {
            try {
                e.getValue().get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                Ctx.out("PASS " + e.getKey());
            } catch (TimeoutException t) {
                failures.add(e.getKey() + ": did not finish within " + CASE_DEADLINE_SEC + " s");
            } catch (java.util.concurrent.ExecutionException x) {
                Throwable c = x.getCause();
                if (!(c instanceof CaseFailed)) {
                    c.printStackTrace();
                }
                failures.add(e.getKey() + ": " + c);
            } catch (InterruptedException x) {
                failures.add(e.getKey() + ": interrupted");
            }
        }
        for (String f : failures) {
            Ctx.out("FAIL " + f);
        }
        Ctx.out(failures.isEmpty() ? "ALL PASSED " + names : "FAILED " + failures.size() + " of " + names.size());
        System.out.flush();
        System.exit(failures.isEmpty() ? 0 : 1);
    }

    /** One conformance case. */
    @FunctionalInterface
    public interface Case {
        void run(Ctx ctx) throws Exception;
    }
}
