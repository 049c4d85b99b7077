#include "service/grpc/request_decoder.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/base/utf8.h"

namespace dllm {
namespace {

namespace pb = google::protobuf;
using pb::io::CodedInputStream;

// Wire types (the protobuf encoding spec).
enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// Walks one message's fields (or an unknown group's, with `descriptor`
// null) up to the stream's current limit, or to the end-group tag of
// `group` when it is not 0. Sets `error` and returns false at the first
// problem.
class Walker {
 public:
  explicit Walker(CodedInputStream* in) : in_(in) {}

  bool Message(const pb::Descriptor* descriptor, const std::string& path, int depth,
               uint32_t group = 0) {
    if (depth > kMaxRequestNesting) {
      return Fail(absl::StrCat("nested deeper than ", kMaxRequestNesting, " levels"));
    }
    while (in_->BytesUntilLimit() != 0) {
      at_ = in_->CurrentPosition();
      uint32_t tag = 0;
      if (!in_->ReadVarint32(&tag)) return Fail("truncated field tag");
      const uint32_t number = tag >> 3, wire = tag & 7;
      if (number == 0) return Fail("field number 0");
      if (wire == kEndGroup) {
        if (group != 0 && number == group) return true;
        return Fail(absl::StrCat("end of group ", number, " without its start"));
      }
      const pb::FieldDescriptor* field =
          descriptor ? descriptor->FindFieldByNumber(static_cast<int>(number)) : nullptr;
      const std::string name =
          absl::StrCat(path, field ? field->name() : absl::StrCat("field ", number));
      if (!Field(field, name, wire, number, depth)) return false;
    }
    if (group != 0) return Fail(absl::StrCat("group ", group, " is not closed"));
    return true;
  }

  const std::string& error() const { return error_; }

 private:
  bool Fail(const std::string& what) {
    error_ = absl::StrCat(what, " at byte ", at_);
    return false;
  }

  bool Field(const pb::FieldDescriptor* field, const std::string& name, uint32_t wire,
             uint32_t number, int depth) {
    switch (wire) {
      case kVarint: {
        uint64_t v;
        return in_->ReadVarint64(&v) || Fail(name + ": truncated varint");
      }
      case kFixed64: {
        uint64_t v;
        return in_->ReadLittleEndian64(&v) || Fail(name + ": truncated 64-bit value");
      }
      case kFixed32: {
        uint32_t v;
        return in_->ReadLittleEndian32(&v) || Fail(name + ": truncated 32-bit value");
      }
      case kStartGroup:
        // Proto3 has no groups: only an unknown one can come; skip it, bounded.
        return Message(nullptr, name + ".", depth + 1, number);
      case kLengthDelimited:
        return Delimited(field, name, depth);
      default:
        return Fail(absl::StrCat(name, ": wire type ", wire, " does not exist"));
    }
  }

  bool Delimited(const pb::FieldDescriptor* field, const std::string& name, int depth) {
    uint32_t length = 0;
    if (!in_->ReadVarint32(&length)) return Fail(name + ": truncated length");
    if (static_cast<int64_t>(length) > in_->BytesUntilLimit()) {
      return Fail(absl::StrCat(name, ": length ", length, " runs past the end of the message"));
    }
    const int start = in_->CurrentPosition();
    if (field != nullptr && field->type() == pb::FieldDescriptor::TYPE_STRING) {
      std::string text;
      if (!in_->ReadString(&text, static_cast<int>(length))) return Fail(name + ": truncated");
      if (const int64_t bad = FirstInvalidUtf8(text); bad >= 0) {
        at_ = start + static_cast<int>(bad);
        return Fail(absl::StrCat(name, ": invalid UTF-8 (byte ", bad, " of the string)"));
      }
      return true;
    }
    if (field != nullptr && field->type() == pb::FieldDescriptor::TYPE_MESSAGE) {
      const CodedInputStream::Limit limit = in_->PushLimit(static_cast<int>(length));
      const bool ok = Message(field->message_type(), name + ".", depth + 1);
      in_->PopLimit(limit);
      return ok;
    }
    return in_->Skip(static_cast<int>(length)) || Fail(name + ": truncated");
  }

  CodedInputStream* in_;
  int at_ = 0;
  std::string error_;
};

}  // namespace

absl::Status DecodeRequest(absl::string_view bytes, pb::Message* out) {
  out->Clear();
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("request is larger than 2 GiB");
  }
  CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                      static_cast<int>(bytes.size()));
  in.PushLimit(static_cast<int>(bytes.size()));
  Walker walker(&in);
  if (!walker.Message(out->GetDescriptor(), "", 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request is not a valid ", out->GetDescriptor()->full_name(), ": ", walker.error()));
  }
  if (!out->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("request is not a valid ", out->GetDescriptor()->full_name()));
  }
  return absl::OkStatus();
}

absl::Status DecodeRequest(const grpc::ByteBuffer& buffer, pb::Message* out) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) {
    out->Clear();
    return absl::InvalidArgumentError("request bytes cannot be read");
  }
  std::string bytes;
  bytes.reserve(buffer.Length());
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return DecodeRequest(bytes, out);
}

grpc::ByteBuffer EncodeMessage(const pb::Message& message) {
  const std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace dllm
