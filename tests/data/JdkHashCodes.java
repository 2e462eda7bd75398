// Writes jdk_hash_codes.json: hashCode() of JDK value classes, computed by the JDK itself.
// statectl ports these hash codes (statecore/hashing.py); tests/test_type_specs.py checks the
// port against this file. Regenerate: javac JdkHashCodes.java && java JdkHashCodes > jdk_hash_codes.json
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.List;

public class JdkHashCodes {
    public static void main(String[] args) {
        List<String> rows = new ArrayList<>();
        long[] seconds = {0L, 1L, -1L, 1700006900L, -62135596800L, 253402300799L,
            Long.MAX_VALUE / 1000, 1L << 40, -(1L << 40) - 7};
        int[] nanos = {0, 1, 999_999_999, 500_000_000, 123_456_789};
        for (long s : seconds) {
            for (int n : nanos) {
                Instant i = Instant.ofEpochSecond(s, n);
                rows.add(String.format("{\"type\": \"Instant\", \"epoch_second\": %d, \"nano\": %d, \"hash\": %d}",
                        i.getEpochSecond(), i.getNano(), i.hashCode()));
            }
        }
        int[][] dates = {{1970, 1, 1}, {2023, 11, 15}, {1, 1, 1}, {9999, 12, 31}, {-5, 3, 7},
            {2000, 2, 29}, {-999999999, 1, 1}, {999999999, 12, 31}, {2047, 6, 30}, {2048, 1, 1}};
        for (int[] d : dates) {
            LocalDate date = LocalDate.of(d[0], d[1], d[2]);
            rows.add(String.format("{\"type\": \"LocalDate\", \"year\": %d, \"month\": %d, \"day\": %d, \"hash\": %d}",
                    d[0], d[1], d[2], date.hashCode()));
        }
        long[] times = {0L, 1L, 86_399_999_999_999L, 3_723_000_000_001L, 43_200_000_000_000L};
        for (long t : times) {
            LocalTime time = LocalTime.ofNanoOfDay(t);
            rows.add(String.format("{\"type\": \"LocalTime\", \"nano_of_day\": %d, \"hash\": %d}",
                    t, time.hashCode()));
            LocalDateTime dt = LocalDateTime.of(LocalDate.of(2023, 11, 15), time);
            rows.add(String.format("{\"type\": \"LocalDateTime\", \"year\": 2023, \"month\": 11, \"day\": 15, \"nano_of_day\": %d, \"hash\": %d}",
                    t, dt.hashCode()));
        }
        String[] integers = {"0", "1", "-1", "10", "4294967295", "4294967296", "-4294967296",
            "9223372036854775807", "-9223372036854775808", "9223372036854775808",
            "123456789012345678901234567890", "-98765432109876543210987654321098765"};
        for (String v : integers) {
            rows.add(String.format("{\"type\": \"BigInteger\", \"value\": \"%s\", \"hash\": %d}",
                    v, new BigInteger(v).hashCode()));
        }
        String[] decimals = {"0", "1", "10", "1.50", "-1.50", "0.000001", "1E+3", "-123.456",
            "12345678901234567890.123456789", "-9223372036854775808", "9223372036854775808.5"};
        for (String v : decimals) {
            BigDecimal d = new BigDecimal(v);
            rows.add(String.format("{\"type\": \"BigDecimal\", \"value\": \"%s\", \"unscaled\": \"%s\", \"scale\": %d, \"hash\": %d}",
                    v, d.unscaledValue(), d.scale(), d.hashCode()));
        }
        long[] millis = {0L, 1L, -1L, 1700006900123L, Long.MAX_VALUE, -62135596800000L};
        for (long m : millis) {
            rows.add(String.format("{\"type\": \"Date\", \"millis\": %d, \"hash\": %d}",
                    m, new java.util.Date(m).hashCode()));
            java.sql.Timestamp ts = new java.sql.Timestamp(m);
            ts.setNanos(123_456_789);
            rows.add(String.format("{\"type\": \"Timestamp\", \"millis\": %d, \"nanos\": 123456789, \"hash\": %d}",
                    m, ts.hashCode()));
        }
        System.out.println("[\n" + String.join(",\n", rows) + "\n]");
    }
}
