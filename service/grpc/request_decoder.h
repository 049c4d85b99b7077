// Requests parsed from their wire bytes by the server itself. gRPC's own
// parse turns bytes protobuf refuses (invalid UTF-8 in a string, a truncated
// varint, a wire type that does not exist, groups nested without end) into
// an empty UNIMPLEMENTED, which clients and balancers read as "no such
// method", and protobuf logs an ERROR line per request. Here the bytes are
// walked against the message's descriptor first, so each of those is
// INVALID_ARGUMENT naming the field and the byte offset, and protobuf only
// ever sees bytes it accepts.
#ifndef DLLM_SERVICE_GRPC_REQUEST_DECODER_H_
#define DLLM_SERVICE_GRPC_REQUEST_DECODER_H_

#include <google/protobuf/message.h>
#include <grpcpp/support/byte_buffer.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dllm {

// Deepest nesting of messages or unknown groups a request may have.
inline constexpr int kMaxRequestNesting = 32;

// Parses `bytes` into `out` (cleared first). INVALID_ARGUMENT, e.g.
// "request is not a valid dllm.v1.GenerateRequest: prompt.text: invalid
// UTF-8 at byte 7".
absl::Status DecodeRequest(absl::string_view bytes, google::protobuf::Message* out);
// The same for a gRPC byte buffer.
absl::Status DecodeRequest(const grpc::ByteBuffer& buffer, google::protobuf::Message* out);

// `message`'s wire bytes as a gRPC byte buffer (for raw-method replies).
grpc::ByteBuffer EncodeMessage(const google::protobuf::Message& message);

}  // namespace dllm

#endif  // DLLM_SERVICE_GRPC_REQUEST_DECODER_H_
