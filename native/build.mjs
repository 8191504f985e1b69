// Placeholder until the native data plane lands: nothing to build.
