// OpenSSL keeps its errors in a per-thread queue and requires it to be empty before each
// SSL_read/SSL_write/SSL_connect/SSL_accept: SSL_get_error reports SSL_ERROR_SSL for a call that
// merely would block whenever an older error is still queued. CAF 0.17's OpenSSL session drains
// the queue only when its logging is compiled in (Debian's CAF is built quiet), and all of a
// node's TLS links share the middleman's one thread. So one link's error (a peer that vanished
// mid-record: "unexpected eof while reading"; a client whose certificate failed verification)
// stayed queued and the next would-block read on any *other* link closed that link too: a single
// refused handshake disconnected every established client, and one lost replica took the other
// replicas with it (tests/remote/test_tls.cpp).
//
// CAF's session cannot be replaced, so troupe interposes the four I/O entry points it calls:
// these definitions precede libssl's in the dynamic linker's lookup order (the executable, or the
// module that links troupe, comes before the libraries it depends on), clear the calling
// thread's queue, and call on to OpenSSL's own. Clearing first is what OpenSSL documents for
// every caller, so other users of OpenSSL in the process are not affected.

#include "engine/runtime/tls_error_isolation.hpp"

#include <dlfcn.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "troupe/error.hpp"

namespace {

// OpenSSL's own definitions: the next ones after troupe's in lookup order, resolved once.
struct OpenSsl {
  int (*read)(SSL*, void*, int);
  int (*write)(SSL*, const void*, int);
  int (*connect)(SSL*);
  int (*accept)(SSL*);
};

template <class Fn>
Fn next_definition(const char* name) {
  static_assert(sizeof(Fn) == sizeof(void*));
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

const OpenSsl& openssl() {
  static const OpenSsl fns{next_definition<decltype(OpenSsl::read)>("SSL_read"),
                           next_definition<decltype(OpenSsl::write)>("SSL_write"),
                           next_definition<decltype(OpenSsl::connect)>("SSL_connect"),
                           next_definition<decltype(OpenSsl::accept)>("SSL_accept")};
  return fns;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int SSL_read(SSL* ssl, void* buf, int num) {
  ERR_clear_error();
  return openssl().read(ssl, buf, num);
}

__attribute__((visibility("default"))) int SSL_write(SSL* ssl, const void* buf, int num) {
  ERR_clear_error();
  return openssl().write(ssl, buf, num);
}

__attribute__((visibility("default"))) int SSL_connect(SSL* ssl) {
  ERR_clear_error();
  return openssl().connect(ssl);
}

__attribute__((visibility("default"))) int SSL_accept(SSL* ssl) {
  ERR_clear_error();
  return openssl().accept(ssl);
}

}  // extern "C"

namespace troupe::detail {

void isolate_tls_errors_per_call() {
  // Resolved here, before any link exists, so a missing definition is an error at start-up and
  // never a null call on the middleman's thread.
  const OpenSsl& fns = openssl();
  if (!fns.read || !fns.write || !fns.connect || !fns.accept) {
    const char* why = dlerror();
    throw ExecutionError(std::string("TLS: cannot find OpenSSL's SSL_read, SSL_write, "
                                     "SSL_connect or SSL_accept behind troupe's (") +
                         (why ? why : "not loaded") + ")");
  }
}

}  // namespace troupe::detail
