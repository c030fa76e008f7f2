package io.partfs.engine.fuse;

import io.partfs.engine.NameCodec;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/**
 * Lists directories of this process's own mount in a child process (bash), never in this one.
 *
 * <p>A FUSE server must not make system calls on its own mount. A request it sent there and
 * the kernel handed to one of its threads is waited for uninterruptibly; when the server is
 * killed (SIGKILL, the out-of-memory killer) the threads that would answer are gone, the one
 * waiting never exits, so the process never closes /dev/fuse and the kernel never ends the
 * connection: the mount hangs instead of answering ENOTCONN, and so does every process that
 * touches it (ClickHouse stuck in D state, a pod that cannot terminate). The crash soak hit this
 * with the part readahead listing through the mount. Here a child does the listing: if this
 * process is killed it exits whole, the connection ends, and the child's call fails.
 *
 * <p>Protocol: a NUL-terminated path in, a line out: "1" when the path is a directory that was
 * listed (glob, which reads the whole directory) and then stat'ed, else "0". Not thread-safe:
 * one per thread.
 */
final class ChildLister implements AutoCloseable {
    // the listing first, then the stat: a listing leaves the directory's atime stale in the
    // kernel, and ClickHouse's stat of the part would otherwise be a GETATTR
    private static final String SCRIPT = "shopt -s nullglob dotglob\n"
            + "while IFS= read -r -d '' d; do a=(\"$d\"/*); if [[ -d $d ]]; then echo 1; else echo 0; fi; done\n";

    private final Process process;
    private final OutputStream in;
    private final BufferedReader out;

    ChildLister() throws IOException {
        process = new ProcessBuilder("bash", "--noprofile", "--norc", "-c", SCRIPT)
                .redirectError(ProcessBuilder.Redirect.DISCARD).start();
        in = process.getOutputStream();
        out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.US_ASCII));
    }

    /** Lists {@code dir} and stats it; false if it is not a directory (removed or renamed meanwhile). */
    boolean list(Path dir) throws IOException {
        byte[] path = NameCodec.encode(dir.toString());
        in.write(path);
        in.write(0);
        in.flush();
        String answer = out.readLine();
        if (answer == null) {
            throw new IOException("the listing process exited (" + (process.isAlive() ? "running" : "status " + process.exitValue()) + ")");
        }
        return answer.equals("1");
    }

    boolean alive() {
        return process.isAlive();
    }

    @Override
    public void close() {
        try {
            in.close(); // the loop ends at end of input
        } catch (IOException e) {
            // gone already
        }
        process.destroy();
    }
}
