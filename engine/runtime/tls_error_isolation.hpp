#pragma once

namespace troupe::detail {

/// Makes every TLS read, write and handshake in this process start with an empty OpenSSL error
/// queue (see tls_error_isolation.cpp for why). Call before loading CAF's OpenSSL module; throws
/// ExecutionError when OpenSSL's functions cannot be found behind troupe's.
void isolate_tls_errors_per_call();

}  // namespace troupe::detail
