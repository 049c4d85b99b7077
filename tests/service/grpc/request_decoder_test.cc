// DecodeRequest: valid bytes parse as protobuf would; every kind of bytes
// protobuf refuses gets INVALID_ARGUMENT naming the field and byte offset.
#include "service/grpc/request_decoder.h"

#include <string>

#include "dllm/v1/dllm.pb.h"
#include "gtest/gtest.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using testing::IsOk;
using testing::StatusIs;

// Wire-format pieces (the protobuf encoding spec).
std::string Varint(uint64_t v) {
  std::string out;
  do {
    uint8_t byte = v & 0x7F;
    v >>= 7;
    if (v != 0) byte |= 0x80;
    out.push_back(static_cast<char>(byte));
  } while (v != 0);
  return out;
}
std::string Tag(uint32_t field, uint32_t wire) { return Varint(field << 3 | wire); }
std::string Delimited(uint32_t field, const std::string& payload) {
  return Tag(field, 2) + Varint(payload.size()) + payload;
}

TEST(RequestDecoderTest, ValidBytesParseLikeProtobuf) {
  v1::GenerateRequest req;
  req.set_request_id("r-1");
  req.mutable_prompt()->set_text("The capital of France is");
  req.mutable_diffusion()->set_gen_length(64);
  req.mutable_sampling()->set_seed(7);
  v1::GenerateRequest got;
  ASSERT_THAT(DecodeRequest(req.SerializeAsString(), &got), IsOk());
  EXPECT_EQ(got.SerializeAsString(), req.SerializeAsString());
  // Unknown fields (a newer client) are accepted and kept, as protobuf does.
  ASSERT_THAT(DecodeRequest(req.SerializeAsString() + Tag(999, 0) + Varint(5), &got), IsOk());
  EXPECT_EQ(got.prompt().text(), "The capital of France is");
  EXPECT_THAT(DecodeRequest(std::string(), &got), IsOk());
}

TEST(RequestDecoderTest, InvalidUtf8NamesTheField) {
  v1::GenerateRequest got;
  // GenerateRequest.prompt (3) { Prompt.text (1) = "ab\xff" }
  const std::string bytes = Delimited(3, Delimited(1, "ab\xff"));
  EXPECT_THAT(DecodeRequest(bytes, &got),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "not a valid dllm.v1.GenerateRequest: prompt.text: invalid UTF-8 (byte 2 "
                       "of the string) at byte 6"));
  // The same inside a Step op and a Tokenize request.
  v1::TokenizeRequest tok;
  EXPECT_THAT(DecodeRequest(Delimited(1, "\xc3"), &tok),
              StatusIs(absl::StatusCode::kInvalidArgument, "text: invalid UTF-8"));
}

TEST(RequestDecoderTest, BrokenWireFormatSaysWhereAndWhat) {
  v1::GenerateRequest got;
  struct Case {
    std::string bytes;
    const char* message;
  };
  const Case cases[] = {
      {Tag(1, 2) + "\xff\xff", "truncated length"},
      {Tag(4, 0) + "\x80\x80", "truncated varint"},
      {Tag(4, 7), "wire type 7 does not exist at byte 0"},
      {Tag(4, 6), "wire type 6 does not exist"},
      {Tag(1, 2) + Varint(100) + "abc", "length 100 runs past the end of the message"},
      {Tag(50, 4), "end of group 50 without its start"},
      {Tag(50, 3) + Tag(1, 0) + Varint(1), "group 50 is not closed"},
      {Tag(0, 0) + Varint(1), "field number 0"},
      {Tag(7, 1) + "abc", "truncated 64-bit value"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    EXPECT_THAT(DecodeRequest(c.bytes, &got),
                StatusIs(absl::StatusCode::kInvalidArgument, c.message));
  }
}

TEST(RequestDecoderTest, DeepNestingIsBounded) {
  v1::GenerateRequest got;
  std::string groups;
  for (int i = 0; i < 10000; ++i) groups += Tag(60, 3);
  EXPECT_THAT(DecodeRequest(groups, &got),
              StatusIs(absl::StatusCode::kInvalidArgument, "nested deeper than 32 levels"));
  // Messages nest too: an unknown field is not a message, so nest real ones
  // (Step's commit op holds repeated CommittedToken) only a few levels.
  v1::StepRequest step;
  step.mutable_commit()->add_tokens()->set_position(3);
  v1::StepRequest parsed;
  ASSERT_THAT(DecodeRequest(step.SerializeAsString(), &parsed), IsOk());
  EXPECT_EQ(parsed.commit().tokens(0).position(), 3u);
}

TEST(RequestDecoderTest, EncodeMessageRoundTrips) {
  v1::ModelInfo info;
  info.set_name("tiny");
  const grpc::ByteBuffer buffer = EncodeMessage(info);
  v1::ModelInfo back;
  ASSERT_THAT(DecodeRequest(buffer, &back), IsOk());
  EXPECT_EQ(back.name(), "tiny");
}

}  // namespace
}  // namespace dllm
