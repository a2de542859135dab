#pragma once

#include <stdexcept>
#include <string>

namespace troupe {

/// Base of every error troupe throws. The message names the offending input (tensor, node,
/// property key, byte offset) and what was expected.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A caller-supplied value is wrong: a bad property value, an unknown tensor name, a malformed
/// file.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// A property key the device or compiled model does not know.
class UnknownProperty : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

/// A tensor whose shape or element type does not fit the model's input/output.
class TensorMismatch : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

/// A model that fails validation or shape inference; the message names the node.
class ModelError : public Error {
 public:
  using Error::Error;
};

/// The model has an operation that no backend of the device implements.
class UnsupportedOperation : public ModelError {
 public:
  using ModelError::ModelError;
};

/// The request is in flight; its tensors and counters cannot be touched until it completes.
class Busy : public Error {
 public:
  using Error::Error;
};

/// The request was cancelled before it completed.
class Cancelled : public Error {
 public:
  using Error::Error;
};

/// The scheduler refused the request at once: its priority level's queue already holds
/// max_queue_size requests. Retry later.
class QueueFull : public Error {
 public:
  using Error::Error;
};

/// The request's queue timeout passed before it was scheduled (timeout_action REJECT); it never
/// ran.
class RequestTimeout : public Error {
 public:
  using Error::Error;
};

/// A kernel or stage failed while running a request.
class ExecutionError : public Error {
 public:
  using Error::Error;
};

/// A remote model could not answer: no replica reachable, or the one that had the request was
/// lost (disconnected, killed, or silent past the request timeout) and no other could take it.
class RemoteUnavailable : public Error {
 public:
  using Error::Error;
};

/// A serialized model or compiled blob is malformed or does not belong to this build/device.
class FormatError : public Error {
 public:
  using Error::Error;
};

}  // namespace troupe
