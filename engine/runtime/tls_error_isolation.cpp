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

using ReadFn = int (*)(SSL*, void*, int);
using WriteFn = int (*)(SSL*, const void*, int);
using HandshakeFn = int (*)(SSL*);

// OpenSSL's definition of `name`: the next one after troupe's in lookup order.
void* openssl_definition(const char* name) {
  return dlsym(RTLD_NEXT, name);
}

template <class Fn>
Fn next(const char* name) {
  static_assert(sizeof(Fn) == sizeof(void*));
  return reinterpret_cast<Fn>(openssl_definition(name));
}

ReadFn openssl_read() {
  static const ReadFn fn = next<ReadFn>("SSL_read");
  return fn;
}
WriteFn openssl_write() {
  static const WriteFn fn = next<WriteFn>("SSL_write");
  return fn;
}
HandshakeFn openssl_connect() {
  static const HandshakeFn fn = next<HandshakeFn>("SSL_connect");
  return fn;
}
HandshakeFn openssl_accept() {
  static const HandshakeFn fn = next<HandshakeFn>("SSL_accept");
  return fn;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int SSL_read(SSL* ssl, void* buf, int num) {
  ERR_clear_error();
  return openssl_read()(ssl, buf, num);
}

__attribute__((visibility("default"))) int SSL_write(SSL* ssl, const void* buf, int num) {
  ERR_clear_error();
  return openssl_write()(ssl, buf, num);
}

__attribute__((visibility("default"))) int SSL_connect(SSL* ssl) {
  ERR_clear_error();
  return openssl_connect()(ssl);
}

__attribute__((visibility("default"))) int SSL_accept(SSL* ssl) {
  ERR_clear_error();
  return openssl_accept()(ssl);
}

}  // extern "C"

namespace troupe::detail {

void isolate_tls_errors_per_call() {
  // Resolved here, before any link exists, so a missing definition is an error at start-up and
  // never a null call on the middleman's thread.
  if (!openssl_read() || !openssl_write() || !openssl_connect() || !openssl_accept()) {
    const char* why = dlerror();
    throw ExecutionError(std::string("TLS: cannot find OpenSSL's SSL_read, SSL_write, "
                                     "SSL_connect or SSL_accept behind troupe's (") +
                         (why ? why : "not loaded") + ")");
  }
}

}  // namespace troupe::detail
