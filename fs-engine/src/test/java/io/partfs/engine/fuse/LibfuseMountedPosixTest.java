package io.partfs.engine.fuse;

/** {@link MountedPosixTest} through the libfuse 2 driver (jnr-fuse). */
class LibfuseMountedPosixTest extends MountedPosixTest {
    @Override
    FuseOptions.Driver driver() {
        return FuseOptions.Driver.LIBFUSE;
    }
}
