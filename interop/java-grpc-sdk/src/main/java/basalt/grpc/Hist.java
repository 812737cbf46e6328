package basalt.grpc;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * A latency histogram in microseconds that many threads record into
 * without locks: exact below 1,024 µs, then 64 buckets per power of two
 * (each at most 1/64 ≈ 1.6 % wide), up to 2^40 µs. Quantiles report a
 * bucket's lower bound.
 */
final class Hist {
    private static final int SUB = 64;
    private static final int EXACT = 1024;
    private static final int POWERS = 30;
    private final AtomicLongArray counts = new AtomicLongArray(EXACT + POWERS * SUB);

    static int index(long us) {
        if (us < EXACT) {
            return (int) Math.max(0, us);
        }
        int power = 63 - Long.numberOfLeadingZeros(us);
        int sub = (int) ((us >>> (power - 6)) & (SUB - 1));
        int i = EXACT + (power - 10) * SUB + sub;
        return Math.min(i, EXACT + POWERS * SUB - 1);
    }

    static long lower(int i) {
        if (i < EXACT) {
            return i;
        }
        int power = (i - EXACT) / SUB + 10;
        int sub = (i - EXACT) % SUB;
        return (1L << power) + ((long) sub << (power - 6));
    }

    void record(long us) {
        counts.incrementAndGet(index(us));
    }

    long count() {
        long n = 0;
        for (int i = 0; i < counts.length(); i++) {
            n += counts.get(i);
        }
        return n;
    }

    /** The value at quantile {@code q} (0..1); 0 when empty. */
    long quantile(double q) {
        long n = count();
        if (n == 0) {
            return 0;
        }
        long rank = Math.max(1, (long) Math.ceil(q * n));
        long seen = 0;
        for (int i = 0; i < counts.length(); i++) {
            seen += counts.get(i);
            if (seen >= rank) {
                return lower(i);
            }
        }
        return lower(counts.length() - 1);
    }

    /** {@code "p50":..,"p99":..,"p999":..} for a JSON object. */
    String json() {
        return String.format("{\"p50\":%d,\"p99\":%d,\"p999\":%d}", quantile(0.5), quantile(0.99),
            quantile(0.999));
    }
}
