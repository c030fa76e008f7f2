package io.partfs.engine.fuse;

import java.util.ArrayList;
import java.util.List;

/**
 * How the kernel mounts PartFS: cache timeouts and libfuse options. Immutable; build with
 * {@link #builder()}.
 *
 * <p>Defaults are right first: attributes are not cached by the kernel (0 s), so {@code st_nlink}
 * is right just after {@code ln} and a file's size is right just after another handle wrote
 * it (the high-level FUSE API gives each hard link its own kernel inode, which a cached
 * attribute would let drift). Entries and negative lookups are cached for 1 s. A volume's only
 * writer can raise all three safely, because every change then passes through this kernel.
 */
public final class FuseOptions {
    private final double attrTimeout;
    private final double entryTimeout;
    private final double negativeTimeout;
    private final boolean allowOther;
    private final List<String> extra;

    private FuseOptions(Builder b) {
        this.attrTimeout = b.attrTimeout;
        this.entryTimeout = b.entryTimeout;
        this.negativeTimeout = b.negativeTimeout;
        this.allowOther = b.allowOther;
        this.extra = List.copyOf(b.extra);
    }

    public static Builder builder() {
        return new Builder();
    }

    public double attrTimeout() {
        return attrTimeout;
    }

    public double entryTimeout() {
        return entryTimeout;
    }

    public double negativeTimeout() {
        return negativeTimeout;
    }

    /** The {@code -o} arguments for libfuse. */
    List<String> toArgs() {
        List<String> opts = new ArrayList<>(List.of(
                "fsname=partfs", "subtype=partfs",
                "big_writes", "max_write=131072", "max_read=131072",
                "use_ino", "default_permissions", "hard_remove",
                "attr_timeout=" + attrTimeout, "entry_timeout=" + entryTimeout,
                "negative_timeout=" + negativeTimeout));
        if (allowOther) {
            opts.add("allow_other");
        }
        opts.addAll(extra);
        return List.of("-o", String.join(",", opts));
    }

    public static final class Builder {
        private double attrTimeout = 0;
        private double entryTimeout = 1;
        private double negativeTimeout = 1;
        private boolean allowOther = true;
        private final List<String> extra = new ArrayList<>();

        /** Seconds the kernel may cache attributes (stat). */
        public Builder attrTimeout(double s) { this.attrTimeout = s; return this; }

        /** Seconds the kernel may cache a name-to-inode lookup. */
        public Builder entryTimeout(double s) { this.entryTimeout = s; return this; }

        /** Seconds the kernel may cache "no such name". */
        public Builder negativeTimeout(double s) { this.negativeTimeout = s; return this; }

        /** Let other users (ClickHouse's own user) use the mount; needs root or user_allow_other. */
        public Builder allowOther(boolean b) { this.allowOther = b; return this; }

        /** Another libfuse {@code -o} option, passed as given. */
        public Builder option(String o) { this.extra.add(o); return this; }

        public FuseOptions build() {
            for (double t : new double[] {attrTimeout, entryTimeout, negativeTimeout}) {
                if (t < 0 || Double.isNaN(t) || t > 86400) {
                    throw new IllegalArgumentException("cache timeouts must be between 0 and 86400 seconds, not " + t);
                }
            }
            for (String o : extra) {
                if (o.contains(",") || o.isBlank()) {
                    throw new IllegalArgumentException("give FUSE options one at a time, not '" + o + "'");
                }
            }
            return new FuseOptions(this);
        }
    }
}
