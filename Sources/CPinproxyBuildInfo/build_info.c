#include "pinproxy_build_info.h"

// Package.swift turns the PINPROXY_COMMIT environment variable into this
// define: a C define can carry a value, a Swift one cannot, and a generated
// Swift file would need a build plugin.
#ifndef PINPROXY_COMMIT
#define PINPROXY_COMMIT ""
#endif

const char *pinproxy_build_commit(void) {
    return PINPROXY_COMMIT;
}
