// Between granary's Status and gRPC's status, for every gRPC server and client of granary: the
// canonical codes map one to one where both have them. Pure.
#pragma once

#include <grpcpp/support/status.h>

#include "common/result.h"

namespace granary {

grpc::Status toGrpc(const Status& status);
Status fromGrpc(const grpc::Status& status);

}  // namespace granary
