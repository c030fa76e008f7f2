package io.partfs.engine;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * File names, symlink targets and extended-attribute names between the bytes Linux gives them
 * and the strings the engine keeps them as. Linux names are any bytes but '/' and NUL, not
 * necessarily UTF-8: decoding them as UTF-8 turned each invalid byte into U+FFFD, so
 * {@code "\xff"} and {@code "\xfe"} became one name, and a listing returned other bytes than were
 * created. Here, as with Python's "surrogateescape" (PEP 383), a byte that is not part of valid
 * UTF-8 becomes the lone surrogate U+DC80..U+DCFF and is written back as that byte: bytes to
 * string to bytes is exact, and valid UTF-8 (every name ClickHouse makes, every name stored
 * before this codec) reads and writes exactly as before, so volumes need no conversion.
 */
public final class NameCodec {
    private static final char ESCAPE = 0xDC00;

    private NameCodec() {
    }

    public static String decode(byte[] b) {
        return decode(b, 0, b.length);
    }

    /** The string for {@code len} bytes of {@code b} at {@code off}. */
    public static String decode(byte[] b, int off, int len) {
        int end = off + len;
        int i = off;
        while (i < end && b[i] >= 0) {
            i++;
        }
        if (i == end) {
            return new String(b, off, len, StandardCharsets.ISO_8859_1); // ASCII: the common case
        }
        StringBuilder out = new StringBuilder(len);
        for (int j = off; j < i; j++) {
            out.append((char) b[j]);
        }
        while (i < end) {
            int b0 = b[i] & 0xff;
            int n = sequenceLength(b, i, end);
            if (n == 0) {
                out.append((char) (ESCAPE | b0));
                i++;
                continue;
            }
            int cp = switch (n) {
                case 1 -> b0;
                case 2 -> (b0 & 0x1f) << 6 | b[i + 1] & 0x3f;
                case 3 -> (b0 & 0x0f) << 12 | (b[i + 1] & 0x3f) << 6 | b[i + 2] & 0x3f;
                default -> (b0 & 0x07) << 18 | (b[i + 1] & 0x3f) << 12 | (b[i + 2] & 0x3f) << 6 | b[i + 3] & 0x3f;
            };
            out.appendCodePoint(cp);
            i += n;
        }
        return out.toString();
    }

    /**
     * The length of the well-formed UTF-8 sequence at {@code i} (Unicode table 3-7: no overlong
     * forms, no surrogates, nothing past U+10FFFF), or 0 if the byte there does not start one.
     */
    private static int sequenceLength(byte[] b, int i, int end) {
        int b0 = b[i] & 0xff;
        if (b0 < 0x80) {
            return 1;
        }
        int n;
        int lo = 0x80;
        int hi = 0xbf;
        if (b0 >= 0xc2 && b0 <= 0xdf) {
            n = 2;
        } else if (b0 >= 0xe0 && b0 <= 0xef) {
            n = 3;
            lo = b0 == 0xe0 ? 0xa0 : 0x80;
            hi = b0 == 0xed ? 0x9f : 0xbf;
        } else if (b0 >= 0xf0 && b0 <= 0xf4) {
            n = 4;
            lo = b0 == 0xf0 ? 0x90 : 0x80;
            hi = b0 == 0xf4 ? 0x8f : 0xbf;
        } else {
            return 0;
        }
        if (i + n > end) {
            return 0;
        }
        int b1 = b[i + 1] & 0xff;
        if (b1 < lo || b1 > hi) {
            return 0;
        }
        for (int k = 2; k < n; k++) {
            int bk = b[i + k] & 0xff;
            if (bk < 0x80 || bk > 0xbf) {
                return 0;
            }
        }
        return n;
    }

    /** The bytes of {@code s}: UTF-8, with each escaped byte written back as itself. */
    public static byte[] encode(String s) {
        int len = s.length();
        boolean plain = true;
        for (int i = 0; i < len && plain; i++) {
            plain = !Character.isSurrogate(s.charAt(i));
        }
        if (plain) {
            return s.getBytes(StandardCharsets.UTF_8);
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(len + 8);
        for (int i = 0; i < len; i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < len && Character.isLowSurrogate(s.charAt(i + 1))) {
                int cp = Character.toCodePoint(c, s.charAt(++i));
                out.write(0xf0 | cp >> 18);
                out.write(0x80 | cp >> 12 & 0x3f);
                out.write(0x80 | cp >> 6 & 0x3f);
                out.write(0x80 | cp & 0x3f);
            } else if (c >= (ESCAPE | 0x80) && c <= (ESCAPE | 0xff)) {
                out.write(c & 0xff);
            } else if (Character.isSurrogate(c)) {
                // a lone surrogate that no decoded name holds: its three generalized UTF-8 bytes
                out.write(0xe0 | c >> 12);
                out.write(0x80 | c >> 6 & 0x3f);
                out.write(0x80 | c & 0x3f);
            } else {
                byte[] u = String.valueOf(c).getBytes(StandardCharsets.UTF_8);
                out.write(u, 0, u.length);
            }
        }
        return out.toByteArray();
    }
}
