// Writes GGUF bytes for tests, valid by default, with knobs to break each
// rule the reader enforces (counts, offsets, types, alignment).
#ifndef DLLM_TESTS_TESTING_GGUF_BUILDER_H_
#define DLLM_TESTS_TESTING_GGUF_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dllm::testing {

class GgufBuilder {
 public:
  struct Tensor {
    std::string name;
    uint32_t type = 0;               // ggml type id
    std::vector<uint64_t> ne;        // ne[0] first
    std::string data;                // bytes written to the data section
    std::optional<uint64_t> offset;  // overrides the computed offset
  };

  // Header knobs.
  uint32_t magic = 0x46554747;
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors_override;
  std::optional<uint64_t> n_kv_override;
  uint32_t alignment = 32;  // used to place data (general.alignment is a kv)

  GgufBuilder& U8(const std::string& key, uint8_t v);
  GgufBuilder& U32(const std::string& key, uint32_t v);
  GgufBuilder& I32(const std::string& key, int32_t v);
  GgufBuilder& U64(const std::string& key, uint64_t v);
  GgufBuilder& F32(const std::string& key, float v);
  GgufBuilder& Bool(const std::string& key, bool v);
  GgufBuilder& Str(const std::string& key, const std::string& v);
  GgufBuilder& StrArray(const std::string& key, const std::vector<std::string>& v);
  GgufBuilder& I32Array(const std::string& key, const std::vector<int32_t>& v);
  GgufBuilder& F32Array(const std::string& key, const std::vector<float>& v);
  // Removes every entry of `key`, so that a test can set it again (a second
  // entry would be a duplicate key, which the reader refuses).
  GgufBuilder& Drop(const std::string& key);
  // A key whose value bytes (after the type id) are given verbatim.
  GgufBuilder& RawKv(const std::string& key, uint32_t type, const std::string& payload);

  // Adds a tensor with `data` sized from type and shape, filled with `fill`.
  GgufBuilder& AddTensor(const std::string& name, uint32_t type, std::vector<uint64_t> ne,
                         uint8_t fill = 0);
  GgufBuilder& AddTensor(Tensor tensor);
  std::vector<Tensor>& tensors() { return tensors_; }

  std::string Build() const;

  // Little-endian encoders, for RawKv payloads.
  static std::string EncU32(uint32_t v);
  static std::string EncU64(uint64_t v);
  static std::string EncStr(const std::string& s);

 private:
  std::vector<std::string> kvs_;  // encoded key + type + value
  std::vector<Tensor> tensors_;
};

// A small, valid `llada`, `dream`, `llada-moe` or `rnd1` model (F32 weights,
// a 300-token byte vocabulary with a mask token; MoE: 4 experts of 16, 2
// active), for tests that need a runnable file.
GgufBuilder TinyModelBuilder(const std::string& arch);

}  // namespace dllm::testing

#endif  // DLLM_TESTS_TESTING_GGUF_BUILDER_H_
