package io.partfs.engine.fuse;

import java.util.ArrayList;
import java.util.List;

/**
 * How the kernel mounts PartFS: cache timeouts and libfuse options. Immutable; build with
 * {@link #builder()}.
 *
 * <p>Defaults are right first: attributes are cached by the kernel for 1 s and entries and
 * negative lookups for 1 s, which other clients of a shared volume see as their changes showing
 * within a second. A volume's only writer can raise all of them safely, because every change
 * then passes through this kernel, which keeps its own caches right. With the libfuse driver the
 * attribute default is 0: its path API gives each hard link its own kernel inode, so a cached
 * {@code st_nlink} would drift after {@code ln}.
 */
public final class FuseOptions {
    /** Which FUSE implementation serves the mount (see {@link FuseMount}). */
    public enum Driver {
        /** PartFS's own kernel-protocol driver on /dev/fuse: inode-based, READDIRPLUS; needs root. */
        KERNEL,
        /** libfuse 2's high-level path API through jnr-fuse. */
        LIBFUSE;

        /** The kernel driver for root (it calls mount(2) itself), libfuse (through fusermount) for others. */
        public static Driver preferred() {
            return LibC.INSTANCE.getuid() == 0 ? KERNEL : LIBFUSE;
        }

        public static Driver parse(String s) {
            for (Driver d : values()) {
                if (d.name().equalsIgnoreCase(s)) {
                    return d;
                }
            }
            throw new IllegalArgumentException("unknown FUSE driver '" + s + "': use kernel or libfuse");
        }
    }

    /** The -o options the kernel driver understands. */
    static final List<String> KERNEL_OPTIONS = List.of("ro", "rw", "nonempty");
    /** The kernel readahead window a mount gets unless told otherwise (see {@link KernelReadahead}). */
    public static final long DEFAULT_READAHEAD = 16L << 20;
    private static final long MAX_READAHEAD = 1L << 30;
    /** How long a busy mount keeps serving, once asked to unmount, before it is detached lazily (see {@link BusyUnmount}). */
    public static final java.time.Duration DEFAULT_UNMOUNT_GRACE = java.time.Duration.ofSeconds(30);

    private final Driver driver;
    private final boolean prefetchParts;
    private final boolean passthrough;
    private final boolean writePassthrough;
    private final double attrTimeout;
    private final double entryTimeout;
    private final double dirEntryTimeout;
    private final double negativeTimeout;
    private final boolean allowOther;
    private final long readahead;
    private final java.time.Duration unmountGrace;
    private final List<String> extra;

    private FuseOptions(Builder b) {
        this.driver = b.driver == null ? Driver.preferred() : b.driver;
        this.prefetchParts = b.prefetchParts;
        this.passthrough = b.passthrough;
        this.writePassthrough = b.writePassthrough;
        this.attrTimeout = b.attrTimeout == null ? (driver == Driver.KERNEL ? 1 : 0) : b.attrTimeout;
        this.entryTimeout = b.entryTimeout;
        this.dirEntryTimeout = b.dirEntryTimeout == null ? b.entryTimeout : b.dirEntryTimeout;
        this.negativeTimeout = b.negativeTimeout;
        this.allowOther = b.allowOther;
        this.readahead = b.readahead;
        this.unmountGrace = b.unmountGrace;
        this.extra = List.copyOf(b.extra);
    }

    public static Builder builder() {
        return new Builder();
    }

    public Driver driver() {
        return driver;
    }

    /** Whether listing a directory of MergeTree parts lists the parts ahead (kernel driver only; see PartPrefetcher). */
    public boolean prefetchParts() {
        return prefetchParts;
    }

    /**
     * Whether read-only opens of files held whole in one locally cached block are handed to the
     * kernel's FUSE passthrough (kernel driver, Linux 6.9+; see {@link Passthrough}).
     */
    public boolean passthrough() {
        return passthrough;
    }

    /**
     * Whether, with {@link #passthrough()} on a write-back mount, the kernel writes new files
     * into local backing files itself (see {@link io.partfs.engine.data.BackedFile}).
     */
    public boolean writePassthrough() {
        return passthrough && writePassthrough;
    }

    /** Seconds the kernel caches a directory's name; {@link #entryTimeout()} for other names. */
    public double dirEntryTimeout() {
        return dirEntryTimeout;
    }

    public boolean allowOther() {
        return allowOther;
    }

    /** Bytes the kernel may read ahead of a sequential reader; 0 for the kernel's own 128 KiB. */
    public long readahead() {
        return readahead;
    }

    /**
     * How long a mount still in use when asked to unmount stays attached, serving, while the
     * unmount is retried; after it the mount is detached lazily and its open files are served as
     * long again at most, then cut off.
     */
    public java.time.Duration unmountGrace() {
        return unmountGrace;
    }

    /** The options given with {@link Builder#option}, as given. */
    public List<String> extra() {
        return extra;
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

    /** The kernel cache timeouts, for the log: "attributes 1 s, names 1 s, directory names 1 s, missing names 1 s". */
    public String describeCaches() {
        return "attributes " + seconds(attrTimeout) + ", names " + seconds(entryTimeout) + ", directory names "
                + seconds(dirEntryTimeout) + ", missing names " + seconds(negativeTimeout);
    }

    private static String seconds(double s) {
        return (s == Math.rint(s) ? Long.toString((long) s) : Double.toString(s)) + " s";
    }

    /** The {@code -o} arguments for libfuse (which has one entry timeout: the smaller applies). */
    List<String> toArgs() {
        double entryTimeout = Math.min(this.entryTimeout, dirEntryTimeout);
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
        private Driver driver;
        private boolean prefetchParts = true;
        private boolean passthrough = true;
        private boolean writePassthrough = true;
        private Double attrTimeout;
        private double entryTimeout = 1;
        private Double dirEntryTimeout;
        private double negativeTimeout = 1;
        private boolean allowOther = true;
        private long readahead = DEFAULT_READAHEAD;
        private java.time.Duration unmountGrace = DEFAULT_UNMOUNT_GRACE;
        private final List<String> extra = new ArrayList<>();

        /** The FUSE driver; default {@link Driver#preferred()}. */
        public Builder driver(Driver d) { this.driver = d; return this; }

        /** List MergeTree part directories ahead when their table directory is listed (default true). */
        public Builder prefetchParts(boolean b) { this.prefetchParts = b; return this; }

        public Builder passthrough(boolean b) { this.passthrough = b; return this; }

        /** New files written by the kernel into local backing files, on write-back mounts (default true). */
        public Builder writePassthrough(boolean b) { this.writePassthrough = b; return this; }

        /** Seconds the kernel may cache a directory's name (default: the entry timeout). */
        public Builder dirEntryTimeout(double s) { this.dirEntryTimeout = s; return this; }

        /** Seconds the kernel may cache attributes (stat); default 1 (kernel driver) or 0 (libfuse). */
        public Builder attrTimeout(double s) { this.attrTimeout = s; return this; }

        /** Seconds the kernel may cache a name-to-inode lookup. */
        public Builder entryTimeout(double s) { this.entryTimeout = s; return this; }

        /** Seconds the kernel may cache "no such name". */
        public Builder negativeTimeout(double s) { this.negativeTimeout = s; return this; }

        /** Let other users (ClickHouse's own user) use the mount; needs root or user_allow_other. */
        public Builder allowOther(boolean b) { this.allowOther = b; return this; }

        /** Kernel readahead window in bytes (default {@link #DEFAULT_READAHEAD}; 0: the kernel's own). */
        public Builder readahead(long bytes) { this.readahead = bytes; return this; }

        /** How long a busy mount keeps serving once asked to unmount (default {@link #DEFAULT_UNMOUNT_GRACE}). */
        public Builder unmountGrace(java.time.Duration d) { this.unmountGrace = d; return this; }

        /** Another libfuse {@code -o} option, passed as given. */
        public Builder option(String o) { this.extra.add(o); return this; }

        public FuseOptions build() {
            for (Double t : new Double[] {attrTimeout, entryTimeout, dirEntryTimeout, negativeTimeout}) {
                if (t == null) {
                    continue;
                }
                if (t < 0 || Double.isNaN(t) || t > 86400) {
                    throw new IllegalArgumentException("cache timeouts must be between 0 and 86400 seconds, not " + t);
                }
            }
            if (unmountGrace.isNegative() || unmountGrace.compareTo(java.time.Duration.ofHours(1)) > 0) {
                throw new IllegalArgumentException("--unmount-grace must be between 0 and 3600 seconds, not " + unmountGrace.toSeconds());
            }
            if (readahead < 0 || readahead > MAX_READAHEAD) {
                throw new IllegalArgumentException("--readahead must be between 0 and 1G (e.g. 16M), not " + readahead + " bytes");
            }
            for (String o : extra) {
                if (o.isBlank()) {
                    throw new IllegalArgumentException("empty FUSE option in -o: write them as -o a,b");
                }
                if (o.contains(",")) {
                    throw new IllegalArgumentException("give FUSE options one at a time, not '" + o + "'");
                }
                if ((driver == null ? Driver.preferred() : driver) == Driver.KERNEL && !KERNEL_OPTIONS.contains(o)) {
                    throw new IllegalArgumentException("FUSE option '" + o + "' is understood only by the libfuse driver "
                            + "(--fuse-driver libfuse); the kernel driver takes " + String.join(", ", KERNEL_OPTIONS));
                }
            }
            return new FuseOptions(this);
        }
    }
}
