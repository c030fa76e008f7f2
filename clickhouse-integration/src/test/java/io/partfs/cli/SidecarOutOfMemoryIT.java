package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.fuse.Mounts;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import org.junit.jupiter.api.Test;

/**
 * A sidecar that runs out of Java heap exits at once (the launcher's -XX:+ExitOnOutOfMemoryError)
 * with a line saying so, instead of serving on with a thread that died half-way through its
 * work; its next start recovers the mount and loses nothing fsynced. The out-of-memory error is
 * real, in the sidecar's own heap: this test loads a Java agent into the running sidecar
 * through the JDK's attach API, and the agent's thread asks for an array as large as the heap
 * (no request to a mount exhausts the heap on purpose, and none should).
 */
class SidecarOutOfMemoryIT {
    @Test
    void aSidecarOutOfHeapExitsSayingSoAndItsNextStartLosesNothingFsynced() throws Exception {
        try (Workdir w = Workdir.create("partfs-oom-")) {
            List<Process> started = new ArrayList<>();
            try {
                exhaustTheHeapOfASidecar(w, started);
            } finally {
                for (Process p : started) { // a failed assertion left it running: stopped before its directory goes
                    if (p.isAlive()) {
                        p.destroyForcibly();
                        p.waitFor(30, TimeUnit.SECONDS);
                    }
                }
            }
        }
    }

    private static void exhaustTheHeapOfASidecar(Workdir w, List<Process> started) throws Exception {
        // write-back with uploads held back: the fsynced file is on the sidecar's disk only
        List<String> mount = List.of("mount", w.mnt.toString(), "--http-address", "none", "--writeback", "--upload-delay", "3600");
        Process sidecar = w.partfs.startMount(mount, w.mnt, w.dir.resolve("sidecar-1.log"));
        started.add(sidecar);
        byte[] data = "fsynced before the heap ran out\n".repeat(1000).getBytes(StandardCharsets.UTF_8);
        try (FileChannel f = FileChannel.open(w.mnt.resolve("kept"), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            f.write(ByteBuffer.wrap(data));
            f.force(true);
        }

        var vm = com.sun.tools.attach.VirtualMachine.attach(Long.toString(sidecar.pid()));
        try {
            vm.loadAgent(agentJar(w.dir).toString());
        } finally {
            vm.detach();
        }
        assertTrue(sidecar.waitFor(60, TimeUnit.SECONDS), "the sidecar exits once out of heap");
        String log = Files.readString(w.dir.resolve("sidecar-1.log"));
        assertEquals(3, sidecar.exitValue(), log);
        assertTrue(log.contains("partfs mount: out of Java memory (heap or metaspace): process " + sidecar.pid()
                + " exits now with code 3, as after a crash: start the mount again to recover it."
                + " If it recurs, give it more heap, e.g. PARTFS_JAVA_EXTRA_OPTS=-Xmx1g"), log);
        assertTrue(Mounts.isMounted(w.mnt) && Mounts.disconnected(w.mnt), "it left a dead mount, as a crash does");

        sidecar = w.partfs.startMount(mount, w.mnt, w.dir.resolve("sidecar-2.log"));
        started.add(sidecar);
        assertTrue(Files.readString(w.dir.resolve("sidecar-2.log")).contains("took down the mount at " + w.mnt),
                "the next start replaced the dead mount");
        assertEquals(new String(data, StandardCharsets.UTF_8), Files.readString(w.mnt.resolve("kept")));
        sidecar.destroy(); // SIGTERM: uploads what is staged, unmounts
        assertTrue(sidecar.waitFor(120, TimeUnit.SECONDS), "the sidecar stops on SIGTERM");
        assertEquals(0, sidecar.exitValue(), Files.readString(w.dir.resolve("sidecar-2.log")));
    }

    /** A jar holding {@link Exhaust} as a Java agent that can be loaded into a running JVM. */
    private static Path agentJar(Path dir) throws Exception {
        Manifest manifest = new Manifest();
        manifest.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        manifest.getMainAttributes().putValue("Agent-Class", Exhaust.class.getName());
        Path jar = dir.resolve("exhaust-heap-agent.jar");
        String entry = Exhaust.class.getName().replace('.', '/') + ".class";
        try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(jar), manifest);
             InputStream in = SidecarOutOfMemoryIT.class.getClassLoader().getResourceAsStream(entry)) {
            out.putNextEntry(new JarEntry(entry));
            in.transferTo(out);
            out.closeEntry();
        }
        return jar;
    }

    /** The agent: a thread of the sidecar's asks for an array the size of its whole heap. */
    public static final class Exhaust {
        public static void agentmain(String args) {
            Thread t = new Thread(() -> {
                byte[] all = new byte[(int) Math.min(Integer.MAX_VALUE - 16, Runtime.getRuntime().maxMemory())];
                System.out.println("allocated " + all.length + " bytes: the heap did not run out");
            }, "test-exhaust-heap");
            t.setDaemon(true);
            t.start();
        }
    }
}
