package io.partfs.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

class NameCodecTest {
    private static byte[] bytes(int... b) {
        byte[] out = new byte[b.length];
        for (int i = 0; i < b.length; i++) {
            out[i] = (byte) b[i];
        }
        return out;
    }

    @Test
    void validUtf8ReadsAndWritesAsTheJdkDoes() {
        for (String s : new String[] {"", "checksums.txt", "all_1_1_0", "café", "日本語", "emoji \uD83D\uDE00 end", "a\u0001\u007f"}) {
            byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
            assertEquals(s, NameCodec.decode(utf8));
            assertArrayEquals(utf8, NameCodec.encode(s));
        }
    }

    @Test
    void invalidBytesComeBackAsThemselvesAndStayApart() {
        byte[][] names = {bytes(0xff, 0xfe), bytes(0xfe, 0xff), bytes('a', 0x80, 'b'), bytes(0xc3), bytes(0xc3, 'a'),
            bytes(0xe6, 0x97), bytes(0xc0, 0xaf), bytes(0xed, 0xa0, 0x80), bytes(0xf4, 0x90, 0x80, 0x80),
            bytes(0xef, 0xbf, 0xbd), bytes('?')};
        Map<String, byte[]> seen = new HashMap<>();
        for (byte[] n : names) {
            String s = NameCodec.decode(n);
            assertArrayEquals(n, NameCodec.encode(s));
            byte[] before = seen.put(s, n);
            assertEquals(null, before, () -> "two names decode alike: " + s);
        }
        // U+FFFD, what a UTF-8 decoder makes of 0xff, is a name of its own
        assertNotEquals(NameCodec.decode(bytes(0xff)), NameCodec.decode(bytes(0xef, 0xbf, 0xbd)));
    }

    @Test
    void anyBytesRoundTrip() {
        Random r = new Random(42);
        for (int i = 0; i < 200_000; i++) {
            byte[] b = new byte[1 + r.nextInt(12)];
            for (int k = 0; k < b.length; k++) {
                // mostly high bytes, where the edges of UTF-8 are
                b[k] = (byte) (r.nextInt(4) == 0 ? r.nextInt(0x80) : 0x80 + r.nextInt(0x80));
            }
            String s = NameCodec.decode(b);
            assertArrayEquals(b, NameCodec.encode(s));
            assertEquals(s, NameCodec.decode(b, 0, b.length));
        }
    }

    @Test
    void decodesARangeOfABuffer() {
        byte[] b = bytes('x', 0xff, 'y', 'z');
        assertArrayEquals(bytes(0xff, 'y'), NameCodec.encode(NameCodec.decode(b, 1, 2)));
        assertEquals("yz", NameCodec.decode(b, 2, 2));
    }
}
