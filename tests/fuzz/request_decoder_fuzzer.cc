// libFuzzer target: any bytes given to the server's request decoder, as
// each request message it parses, must give a status (never a crash, a hang
// or a protobuf abort), and what it accepts must round-trip.
#include <cstddef>
#include <cstdint>

#include "dllm/v1/dllm.pb.h"
#include "service/grpc/request_decoder.h"

namespace {

template <typename T>
void Decode(const uint8_t* data, size_t size) {
  T message;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (dllm::DecodeRequest(bytes, &message).ok()) {
    T again;
    if (!dllm::DecodeRequest(message.SerializeAsString(), &again).ok()) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Decode<dllm::v1::GenerateRequest>(data, size);
  Decode<dllm::v1::StepRequest>(data, size);
  Decode<dllm::v1::TokenizeRequest>(data, size);
  return 0;
}
