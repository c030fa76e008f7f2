package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.fuse.Mounts;
import io.partfs.engine.testing.S3Server;
import io.partfs.engine.testing.TempDirs;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.yaml.snakeyaml.Yaml;

/**
 * The Kubernetes manifests in {@code operator-manifests/}. No Kubernetes runs here, so this
 * checks what can be checked without one: the pieces of the pod fit together (the mount
 * reaches ClickHouse, the disk points at it, the secrets exist), and the sidecar's own script
 * and startup probe, taken from the manifest, run for real against s3proxy with only the
 * pod's paths moved into a temporary directory: format, mount, probe, restart, SIGTERM, and a
 * restart after SIGKILL; ClickHouse's own start waits for that mount.
 */
class OperatorManifestsIT {
    private static final Path DIR = Partfs.ROOT.resolve("operator-manifests");
    private static final String STATE = "/var/lib/partfs";
    private static final String CACHE = "/var/cache/partfs";

    @SuppressWarnings("unchecked")
    private static <T> T at(Object node, Object... path) {
        Object cur = node;
        for (Object step : path) {
            cur = step instanceof Integer i ? ((List<Object>) cur).get(i) : ((Map<String, Object>) cur).get(step);
            if (cur == null) {
                throw new AssertionError("manifest has no " + java.util.Arrays.toString(path) + " (missing at " + step + ")");
            }
        }
        return (T) cur;
    }

    private static Map<String, Object> load(String file) throws IOException {
        return new Yaml().load(Files.readString(DIR.resolve(file)));
    }

    private static Map<String, Object> podSpec() throws IOException {
        return at(load("clickhouse-installation.yaml"), "spec", "templates", "podTemplates", 0, "spec");
    }

    private static Map<String, Object> sidecar() throws IOException {
        return at(podSpec(), "initContainers", 0);
    }

    private static Map<String, Object> mountOf(Map<String, Object> container, String path) {
        List<Map<String, Object>> mounts = at(container, "volumeMounts");
        return mounts.stream().filter(m -> path.equals(m.get("mountPath"))).findFirst()
                .orElseThrow(() -> new AssertionError(container.get("name") + " does not mount " + path));
    }

    /**
     * No Docker engine here either: the image's Dockerfile copies files that exist after
     * {@code mvn package} (the launcher, its JIT directives and class list among them, which
     * the launcher reads at every start), and makes the class data sharing archive at build time.
     */
    @Test
    void theImageCopiesEverythingTheLauncherReads() throws Exception {
        List<String> lines = Files.readAllLines(DIR.resolve("Dockerfile"));
        List<String> copied = new ArrayList<>();
        for (String line : lines) {
            if (line.startsWith("COPY ")) {
                String[] words = line.substring(5).trim().split("\\s+");
                for (int i = 0; i < words.length - 1; i++) {
                    assertTrue(Files.exists(Partfs.ROOT.resolve(words[i])), "Dockerfile copies a missing " + words[i]);
                    copied.add(words[i]);
                }
            }
        }
        String launcher = Files.readString(Partfs.LAUNCHER);
        for (String read : new String[] {"scripts/partfs-jit.json", "scripts/partfs-classes.lst"}) {
            assertTrue(launcher.contains("$ROOT/" + read), "the launcher reads " + read);
            assertTrue(copied.contains(read), "the image has " + read + ": " + copied);
        }
        assertTrue(lines.contains("RUN partfs --version"), "the image makes the class archive when it is built");
    }

    @Test
    void theSidecarsMountReachesClickHouseAndItsDiskPointsAtIt() throws Exception {
        Map<String, Object> chi = load("clickhouse-installation.yaml");
        Map<String, Object> side = sidecar();
        assertEquals("Always", side.get("restartPolicy"), "a native sidecar: started before ClickHouse, stopped after it");
        assertEquals(Boolean.TRUE, at(side, "securityContext", "privileged"), "/dev/fuse and mount(2)");
        Map<String, Object> own = mountOf(side, STATE);
        assertEquals("Bidirectional", own.get("mountPropagation"));
        Map<String, Object> clickhouse = at(podSpec(), "containers", 0);
        Map<String, Object> seen = mountOf(clickhouse, STATE);
        assertEquals("HostToContainer", seen.get("mountPropagation"));
        assertEquals(own.get("name"), seen.get("name"), "one volume for both");
        assertEquals(own.get("name"), at(chi, "spec", "templates", "volumeClaimTemplates", 0, "name"));
        assertEquals(own.get("name"), at(chi, "spec", "configuration", "clusters", 0, "templates", "dataVolumeClaimTemplate"));

        String script = at(side, "args", 0);
        assertTrue(script.contains("partfs mount " + STATE + "/mnt "), script);
        assertTrue(script.contains("--disk-name partfs "), "cache keys name the disk ClickHouse knows: " + script);
        String config = at(chi, "spec", "configuration", "files", "config.d/partfs.xml");
        assertTrue(config.contains("<partfs>") && config.contains("<path>" + STATE + "/mnt/</path>"), config);

        Map<String, Object> secret = load("secret.yaml");
        Map<String, Object> keys = at(secret, "stringData");
        List<Map<String, Object>> env = at(side, "env");
        for (Map<String, Object> e : env) {
            if (e.get("valueFrom") instanceof Map<?, ?> from && from.get("secretKeyRef") != null) {
                String name = at(from, "secretKeyRef", "name");
                String key = at(from, "secretKeyRef", "key");
                assertEquals((String) at(secret, "metadata", "name"), name);
                assertTrue(keys.containsKey(key), e.toString());
            }
        }
    }

    @Test
    void theSidecarScriptFormatsMountsSurvivesARestartAndStopsCleanlyOnSigterm() throws Exception {
        Path dir = Files.createTempDirectory("partfs-k8s-");
        Path mnt = dir.resolve("state/mnt");
        Process sidecar = null;
        Process clickhouse = null;
        try (S3Server s3 = S3Server.start()) {
            Map<String, Object> side = sidecar();
            String script = local(at(side, "args", 0), dir);
            List<String> probe = at(side, "startupProbe", "exec", "command");
            String probeScript = local(probe.get(2), dir);
            Path bin = Files.createDirectories(dir.resolve("bin"));
            Files.writeString(bin.resolve("partfs"), "#!/bin/sh\nexec " + Partfs.LAUNCHER + " \"$@\"\n");
            bin.resolve("partfs").toFile().setExecutable(true);

            ProcessBuilder pb = new ProcessBuilder("/bin/sh", "-c", script).redirectErrorStream(true)
                    .redirectOutput(dir.resolve("sidecar.log").toFile());
            Map<String, String> env = pb.environment();
            env.put("PATH", bin + ":" + env.get("PATH"));
            env.put("POD_NAME", "chi-partfs-main-0-0-0");
            env.put("PARTFS_HOME", local(at(envVar(side, "PARTFS_HOME"), "value"), dir));
            env.put("PARTFS_S3_PREFIX", "s3://partfs-k8s/clickhouse");
            env.put("PARTFS_S3_OPTIONS", "?endpoint=" + s3.endpoint() + "&path-style=true");
            env.put("PARTFS_ACCESS_KEY", S3Server.ACCESS_KEY);
            env.put("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
            env.put("PARTFS_HTTP_TOKEN", "k8s-test-token");

            String deadMountId = null;
            byte[] data = new byte[(5 << 20) + 7];
            new Random(5).nextBytes(data);
            // the pod restarting: after a stop (SIGTERM), then after the sidecar was killed
            for (int start = 1; start <= 3; start++) {
                // ClickHouse's container, started ahead of the sidecar: no mount point yet, the
                // bare directory after a SIGTERM, a dead mount after a SIGKILL
                Path started = dir.resolve("clickhouse-started-" + start);
                clickhouse = startClickHouse(dir, started);
                awaitChecks(dir, clickhouse, 2);
                assertFalse(Files.exists(started), "start " + start + ": ClickHouse started without a live mount");
                sidecar = pb.start();
                awaitProbe(probeScript, sidecar, dir);
                assertTrue(clickhouse.waitFor(60, TimeUnit.SECONDS), "start " + start + ": ClickHouse still waits for a live mount");
                assertEquals(0, clickhouse.exitValue());
                assertTrue(Files.exists(started), "start " + start + ": the image's entrypoint ran");
                String mountId = Files.readString(dir.resolve("mount-id")).trim();
                assertTrue(mountId.matches("[0-9a-f-]{36} \\d+"), "start " + start + ": the wrapper recorded the mount's session: " + mountId);
                assertEquals(0, liveness(dir), "start " + start + ": ClickHouse is on the mount it started on");
                if (start == 3) {
                    // the sidecar killed in start 2 and restarted: a ClickHouse that started on the dead mount
                    Files.writeString(dir.resolve("mount-id"), deadMountId + "\n");
                    assertTrue(liveness(dir) != 0, "the liveness probe restarts a ClickHouse whose mount was replaced");
                    Files.writeString(dir.resolve("mount-id"), mountId + "\n");
                }
                deadMountId = mountId;
                try {
                    if (start == 1) {
                        Files.write(mnt.resolve("part.bin"), data);
                    }
                    assertArrayEquals(data, Files.readAllBytes(mnt.resolve("part.bin")), "start " + start);
                } catch (java.io.IOException | AssertionError e) {
                    // the sidecar's log goes with its temp directory: keep it in the failure
                    String listing;
                    try (java.util.stream.Stream<Path> names = Files.list(mnt)) {
                        listing = names.map(p -> p.getFileName().toString()).toList().toString();
                    } catch (java.io.IOException le) {
                        listing = le.toString();
                    }
                    throw new AssertionError("start " + start + ": " + e + "\nmount point holds: " + listing
                            + "\nsidecar log:\n" + Files.readString(dir.resolve("sidecar.log")), e);
                }
                if (start == 2) {
                    sidecar.destroyForcibly(); // SIGKILL: the out-of-memory killer, or a grace period run out
                    assertTrue(sidecar.waitFor(30, TimeUnit.SECONDS));
                    assertTrue(Mounts.disconnected(mnt), "a dead mount left for the next start");
                    assertEquals(0, liveness(dir), "a dead mount not yet replaced: ClickHouse is left alone until it is");
                } else {
                    sidecar.destroy(); // SIGTERM, as the kubelet sends
                    assertTrue(sidecar.waitFor(120, TimeUnit.SECONDS), "the sidecar stops within its grace period");
                    assertEquals(0, sidecar.exitValue(), Files.readString(dir.resolve("sidecar.log")));
                    assertFalse(Mounts.isMounted(mnt), "unmounted on SIGTERM");
                }
                String log = Files.readString(dir.resolve("sidecar.log")); // this start's
                assertEquals(start == 1, log.contains("formatted volume chi-partfs-main-0-0-0 "),
                        "the first start formats, a restart formats nothing: " + log);
                assertEquals(start == 3, log.contains("took down the mount at " + mnt), log);
                assertFalse(log.contains(S3Server.SECRET_KEY) || log.contains("k8s-test-token"), "no secret in the log");
            }
        } finally {
            for (Process p : new Process[] {sidecar, clickhouse}) {
                if (p != null && p.isAlive()) { // a failed assertion left it running
                    p.destroyForcibly();
                    p.waitFor(30, TimeUnit.SECONDS);
                }
            }
            Partfs.ensureUnmounted(mnt);
            TempDirs.deleteRecursively(dir);
        }
    }

    /**
     * A restarted sidecar takes down the dead mount its killed predecessor left, and only then
     * mounts: a probe that read {@code /proc/mounts} just before the takedown still sees the dead
     * mount's line, while the mount point already shows the bare directory beneath. The probe
     * must fail on that state (the first version passed: ClickHouse would have started on the
     * claim's empty directory; the restart test above caught it once in 22 runs, with the page
     * cache dropped every 50 ms beside it). The state is
     * made here with a copy of {@code /proc/mounts} that still lists the mount.
     */
    @Test
    void theStartupProbeFailsOnTheBareDirectoryWhileADeadMountIsStillListed() throws Exception {
        Path dir = Files.createTempDirectory("partfs-k8s-probe-");
        try {
            Path mnt = Files.createDirectories(dir.resolve("state/mnt"));
            Path mounts = dir.resolve("mounts");
            Files.writeString(mounts, Files.readString(Path.of("/proc/mounts"))
                    + "partfs " + mnt + " fuse.partfs rw,nosuid,nodev,relatime,user_id=0,group_id=0 0 0\n");
            List<String> probe = at(sidecar(), "startupProbe", "exec", "command");
            String script = local(probe.get(2), dir);
            assertTrue(script.contains("/proc/mounts"), "the probe checks the mount's type: " + script);
            Process p = new ProcessBuilder("/bin/sh", "-c", script.replace("/proc/mounts", mounts.toString()))
                    .redirectErrorStream(true).start();
            String said = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
            assertTrue(p.waitFor(30, TimeUnit.SECONDS));
            assertTrue(p.exitValue() != 0, "the probe passed on a bare directory: " + said);
        } finally {
            TempDirs.deleteRecursively(dir);
        }
    }

    /**
     * The ClickHouse container's command from the manifest, paths moved under {@code dir}, with
     * the image's entrypoint replaced by a command that creates {@code started}. Every
     * {@code stat} its wait loop runs adds a line to {@code dir/clickhouse-checks}.
     */
    private static Process startClickHouse(Path dir, Path started) throws Exception {
        Map<String, Object> clickhouse = at(podSpec(), "containers", 0);
        List<String> command = at(clickhouse, "command");
        assertEquals(List.of("/bin/sh", "-c"), command);
        String script = at(clickhouse, "args", 0);
        assertTrue(script.contains("exec /entrypoint.sh"), "the wrapper ends in the image's entrypoint: " + script);
        String mounted = at(envVar(clickhouse, "PARTFS_MOUNTED"), "value");
        List<String> probe = at(sidecar(), "startupProbe", "exec", "command");
        assertEquals(probe.get(2), mounted, "ClickHouse waits for what the sidecar's startup probe checks");

        Path bin = Files.createDirectories(dir.resolve("clickhouse-bin"));
        Path stat = bin.resolve("stat");
        Files.writeString(stat, "#!/bin/sh\necho >> " + dir.resolve("clickhouse-checks") + "\nexec /usr/bin/stat \"$@\"\n");
        stat.toFile().setExecutable(true);
        Files.deleteIfExists(dir.resolve("clickhouse-checks"));
        ProcessBuilder pb = new ProcessBuilder("/bin/sh", "-c", local(script, dir).replace("exec /entrypoint.sh", "exec touch " + started))
                .redirectErrorStream(true).redirectOutput(dir.resolve("clickhouse.log").toFile());
        pb.environment().put("PARTFS_MOUNTED", local(mounted, dir));
        pb.environment().put("PARTFS_MOUNT_ID", local(at(envVar(clickhouse, "PARTFS_MOUNT_ID"), "value"), dir));
        pb.environment().put("PATH", bin + ":" + pb.environment().get("PATH"));
        return pb.start();
    }

    /** Waits until ClickHouse's wait loop has checked the mount {@code n} times; fails after 60 s. */
    private static void awaitChecks(Path dir, Process clickhouse, int n) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        Path checks = dir.resolve("clickhouse-checks");
        while (!Files.exists(checks) || Files.readAllLines(checks).size() < n) {
            assertTrue(clickhouse.isAlive(), "ClickHouse's wrapper exited: " + Files.readString(dir.resolve("clickhouse.log")));
            assertTrue(System.nanoTime() < deadline, "ClickHouse's wrapper did not check the mount " + n + " times in 60 s");
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50));
        }
        String said = Files.readString(dir.resolve("clickhouse.log"));
        assertTrue(said.contains("waiting for the PartFS mount"), said);
        assertEquals(1, said.split("waiting for", -1).length - 1, "said once: " + said);
    }

    private static Map<String, Object> envVar(Map<String, Object> container, String name) {
        List<Map<String, Object>> env = at(container, "env");
        return env.stream().filter(e -> name.equals(e.get("name"))).findFirst().orElseThrow();
    }

    /** The manifest's text with the pod's directories moved under {@code dir}. */
    private static String local(String text, Path dir) {
        return text.replace(STATE, dir.resolve("state").toString()).replace(CACHE, dir.resolve("cache").toString())
                .replace("/tmp/partfs-mount-id", dir.resolve("mount-id").toString())
                .replace(java.net.URLEncoder.encode(STATE, java.nio.charset.StandardCharsets.UTF_8),
                        java.net.URLEncoder.encode(dir.resolve("state").toString(), java.nio.charset.StandardCharsets.UTF_8));
    }

    /** Runs ClickHouse's liveness probe from the manifest, paths moved under {@code dir}; returns its exit code. */
    private static int liveness(Path dir) throws Exception {
        Map<String, Object> clickhouse = at(podSpec(), "containers", 0);
        List<String> probe = at(clickhouse, "livenessProbe", "exec", "command");
        ProcessBuilder pb = new ProcessBuilder(probe.get(0), probe.get(1), local(probe.get(2), dir)).redirectErrorStream(true);
        pb.environment().put("PARTFS_MOUNT_ID", local(at(envVar(clickhouse, "PARTFS_MOUNT_ID"), "value"), dir));
        Process p = pb.start();
        p.getInputStream().readAllBytes();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "the liveness probe finished");
        return p.exitValue();
    }

    /** Runs the startup probe every 200 ms, as the kubelet would, until it passes; fails after 120 s. */
    private static void awaitProbe(String probe, Process sidecar, Path dir) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        List<String> cmd = new ArrayList<>(List.of("/bin/sh", "-c", probe));
        while (new ProcessBuilder(cmd).start().waitFor() != 0) {
            assertTrue(sidecar.isAlive(), "the sidecar exited: " + Files.readString(dir.resolve("sidecar.log")));
            assertTrue(System.nanoTime() < deadline, "the startup probe did not pass within 120 s");
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(200));
        }
    }
}
