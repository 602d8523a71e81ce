#include "common/grpc_status.h"

namespace granary {

grpc::Status toGrpc(const Status& status) {
  using G = grpc::StatusCode;
  G code = G::UNKNOWN;
  switch (status.code()) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kCancelled:
      code = G::CANCELLED;
      break;
    case StatusCode::kInvalidArgument:
      code = G::INVALID_ARGUMENT;
      break;
    case StatusCode::kDeadlineExceeded:
      code = G::DEADLINE_EXCEEDED;
      break;
    case StatusCode::kNotFound:
    case StatusCode::kGone:
      code = G::NOT_FOUND;
      break;
    case StatusCode::kAlreadyExists:
      code = G::ALREADY_EXISTS;
      break;
    case StatusCode::kPermissionDenied:
      code = G::PERMISSION_DENIED;
      break;
    case StatusCode::kResourceExhausted:
      code = G::RESOURCE_EXHAUSTED;
      break;
    case StatusCode::kFailedPrecondition:
      code = G::FAILED_PRECONDITION;
      break;
    case StatusCode::kConflict:
      code = G::ABORTED;
      break;
    case StatusCode::kUnavailable:
      code = G::UNAVAILABLE;
      break;
    case StatusCode::kCorruption:
      code = G::DATA_LOSS;
      break;
    case StatusCode::kUnauthenticated:
      code = G::UNAUTHENTICATED;
      break;
    case StatusCode::kInternal:
      code = G::INTERNAL;
      break;
  }
  return {code, status.message()};
}

Status fromGrpc(const grpc::Status& status) {
  using G = grpc::StatusCode;
  StatusCode code = StatusCode::kInternal;
  switch (status.error_code()) {
    case G::OK:
      return Status::ok();
    case G::CANCELLED:
      code = StatusCode::kCancelled;
      break;
    case G::INVALID_ARGUMENT:
    case G::OUT_OF_RANGE:
      code = StatusCode::kInvalidArgument;
      break;
    case G::DEADLINE_EXCEEDED:
      code = StatusCode::kDeadlineExceeded;
      break;
    case G::NOT_FOUND:
      code = StatusCode::kNotFound;
      break;
    case G::ALREADY_EXISTS:
      code = StatusCode::kAlreadyExists;
      break;
    case G::PERMISSION_DENIED:
      code = StatusCode::kPermissionDenied;
      break;
    case G::RESOURCE_EXHAUSTED:
      code = StatusCode::kResourceExhausted;
      break;
    case G::FAILED_PRECONDITION:
      code = StatusCode::kFailedPrecondition;
      break;
    case G::ABORTED:
      code = StatusCode::kConflict;
      break;
    case G::UNAVAILABLE:
      code = StatusCode::kUnavailable;
      break;
    case G::DATA_LOSS:
      code = StatusCode::kCorruption;
      break;
    case G::UNAUTHENTICATED:
      code = StatusCode::kUnauthenticated;
      break;
    default:
      break;
  }
  return {code, status.error_message()};
}

grpc::ChannelArguments nodeChannelArguments() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

}  // namespace granary
