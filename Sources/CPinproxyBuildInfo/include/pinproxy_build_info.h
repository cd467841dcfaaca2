#ifndef PINPROXY_BUILD_INFO_H
#define PINPROXY_BUILD_INFO_H

/// The commit this binary was built from, as given in the PINPROXY_COMMIT
/// environment variable when the package was built ("" when it was not).
const char *pinproxy_build_commit(void);

#endif
