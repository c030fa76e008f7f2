package io.partfs.cli;

import java.util.Locale;

/** Byte sizes as users write them: 4096, 64K, 4M, 10G, 1T (powers of 1024). */
final class Sizes {
    private Sizes() {
    }

    static long parse(String s, String what) {
        String t = s.trim().toUpperCase(Locale.ROOT);
        if (t.endsWith("IB")) {
            t = t.substring(0, t.length() - 2);
        } else if (t.endsWith("B") && t.length() > 1 && !Character.isDigit(t.charAt(t.length() - 2))) {
            t = t.substring(0, t.length() - 1);
        }
        long mult = 1;
        if (!t.isEmpty()) {
            switch (t.charAt(t.length() - 1)) {
                case 'K' -> mult = 1L << 10;
                case 'M' -> mult = 1L << 20;
                case 'G' -> mult = 1L << 30;
                case 'T' -> mult = 1L << 40;
                default -> mult = 1;
            }
        }
        String digits = mult == 1 ? t : t.substring(0, t.length() - 1);
        try {
            long v = Long.parseLong(digits);
            if (v < 0) {
                throw new NumberFormatException();
            }
            return Math.multiplyExact(v, mult);
        } catch (NumberFormatException | ArithmeticException e) {
            throw new IllegalArgumentException("invalid " + what + " '" + s + "': use a number of bytes or a size like 64K, 4M, 10G");
        }
    }

    static String human(long bytes) {
        String[] units = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
        double v = bytes;
        int u = 0;
        while (v >= 1024 && u < units.length - 1) {
            v /= 1024;
            u++;
        }
        return u == 0 ? bytes + " B" : String.format(Locale.ROOT, "%.1f %s", v, units[u]);
    }
}
