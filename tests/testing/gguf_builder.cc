#include "tests/testing/gguf_builder.h"

#include <algorithm>
#include <cstring>

#include "kernels/ggml_types.h"

namespace dllm::testing {
namespace {

template <typename T>
std::string Enc(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

}  // namespace

std::string GgufBuilder::EncU32(uint32_t v) { return Enc(v); }
std::string GgufBuilder::EncU64(uint64_t v) { return Enc(v); }
std::string GgufBuilder::EncStr(const std::string& s) { return Enc<uint64_t>(s.size()) + s; }

GgufBuilder& GgufBuilder::RawKv(const std::string& key, uint32_t type, const std::string& payload) {
  kvs_.push_back(EncStr(key) + EncU32(type) + payload);
  return *this;
}
GgufBuilder& GgufBuilder::U8(const std::string& k, uint8_t v) { return RawKv(k, 0, Enc(v)); }
GgufBuilder& GgufBuilder::Drop(const std::string& key) {
  const std::string prefix = EncStr(key);
  kvs_.erase(std::remove_if(kvs_.begin(), kvs_.end(),
                            [&](const std::string& kv) { return kv.rfind(prefix, 0) == 0; }),
             kvs_.end());
  return *this;
}

GgufBuilder& GgufBuilder::U32(const std::string& k, uint32_t v) { return RawKv(k, 4, Enc(v)); }
GgufBuilder& GgufBuilder::I32(const std::string& k, int32_t v) { return RawKv(k, 5, Enc(v)); }
GgufBuilder& GgufBuilder::F32(const std::string& k, float v) { return RawKv(k, 6, Enc(v)); }
GgufBuilder& GgufBuilder::Bool(const std::string& k, bool v) {
  return RawKv(k, 7, Enc<uint8_t>(v ? 1 : 0));
}
GgufBuilder& GgufBuilder::Str(const std::string& k, const std::string& v) {
  return RawKv(k, 8, EncStr(v));
}
GgufBuilder& GgufBuilder::U64(const std::string& k, uint64_t v) { return RawKv(k, 10, Enc(v)); }

GgufBuilder& GgufBuilder::StrArray(const std::string& k, const std::vector<std::string>& v) {
  std::string p = EncU32(8) + EncU64(v.size());
  for (const std::string& s : v) p += EncStr(s);
  return RawKv(k, 9, p);
}
GgufBuilder& GgufBuilder::I32Array(const std::string& k, const std::vector<int32_t>& v) {
  std::string p = EncU32(5) + EncU64(v.size());
  for (int32_t x : v) p += Enc(x);
  return RawKv(k, 9, p);
}
GgufBuilder& GgufBuilder::F32Array(const std::string& k, const std::vector<float>& v) {
  std::string p = EncU32(6) + EncU64(v.size());
  for (float x : v) p += Enc(x);
  return RawKv(k, 9, p);
}

GgufBuilder& GgufBuilder::AddTensor(const std::string& name, uint32_t type,
                                    std::vector<uint64_t> ne, uint8_t fill) {
  Tensor t;
  t.name = name;
  t.type = type;
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;
  const auto traits = GgmlTypeTraitsOf(type);
  const uint64_t bytes = traits ? n / traits->block_size * traits->type_size : n;
  t.ne = std::move(ne);
  t.data.assign(bytes, static_cast<char>(fill));
  return AddTensor(std::move(t));
}

GgufBuilder& GgufBuilder::AddTensor(Tensor tensor) {
  tensors_.push_back(std::move(tensor));
  return *this;
}

std::string GgufBuilder::Build() const {
  std::string out = EncU32(magic) + EncU32(version);
  out += EncU64(n_tensors_override.value_or(tensors_.size()));
  out += EncU64(n_kv_override.value_or(kvs_.size()));
  for (const std::string& kv : kvs_) out += kv;
  std::vector<uint64_t> offsets;
  uint64_t next = 0;
  for (const Tensor& t : tensors_) {
    const uint64_t off = t.offset.value_or(next);
    offsets.push_back(off);
    next = (off + t.data.size() + alignment - 1) / alignment * alignment;
    out += EncStr(t.name) + EncU32(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) out += EncU64(d);
    out += EncU32(t.type) + EncU64(off);
  }
  if (tensors_.empty()) return out;
  out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
  const size_t data_start = out.size();
  for (size_t k = 0; k < tensors_.size(); ++k) {
    if (tensors_[k].data.empty()) continue;  // e.g. an offset meant to be out of range
    const size_t at = data_start + offsets[k];
    if (out.size() < at + tensors_[k].data.size()) out.resize(at + tensors_[k].data.size(), '\0');
    out.replace(at, tensors_[k].data.size(), tensors_[k].data);
  }
  return out;
}

GgufBuilder TinyModelBuilder(const std::string& arch) {
  const bool dream = arch == "dream";
  const bool moe = arch == "llada-moe" || arch == "rnd1";
  const uint32_t n_embd = 32, n_head = 4, n_head_kv = dream ? 2 : 4, n_ff = 64, n_layer = 2;
  const uint32_t n_expert = 4, n_expert_used = 2, n_ff_exp = 16;
  const uint32_t head_dim = n_embd / n_head;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back("<0x" + std::to_string(b) + ">");
    types.push_back(1);
  }
  for (const char* special : {"<|endoftext|>", "<|startoftext|>", "<|mask|>"}) {
    tokens.push_back(special);
    types.push_back(3);
  }
  while (tokens.size() < 300) {
    tokens.push_back("[PAD" + std::to_string(tokens.size()) + "]");
    types.push_back(5);
  }
  const uint32_t n_vocab = static_cast<uint32_t>(tokens.size());
  GgufBuilder b;
  b.Str("general.architecture", arch).Str("general.name", "tiny-" + arch);
  b.U32(arch + ".context_length", 256).U32(arch + ".embedding_length", n_embd);
  b.U32(arch + ".block_count", n_layer).U32(arch + ".feed_forward_length", n_ff);
  b.U32(arch + ".attention.head_count", n_head).U32(arch + ".attention.head_count_kv", n_head_kv);
  b.F32(arch + ".rope.freq_base", dream ? 1e6f : 5e5f);
  b.F32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  if (moe) {
    b.U32(arch + ".expert_count", n_expert).U32(arch + ".expert_used_count", n_expert_used);
    b.U32(arch + ".expert_feed_forward_length", n_ff_exp);
  }
  b.Str("tokenizer.ggml.model", "gpt2").Str("tokenizer.ggml.pre", dream ? "qwen2" : "gpt-2");
  b.StrArray("tokenizer.ggml.tokens", tokens).I32Array("tokenizer.ggml.token_type", types);
  b.StrArray("tokenizer.ggml.merges", {});
  b.U32("tokenizer.ggml.eos_token_id", 256).U32("tokenizer.ggml.bos_token_id", 257);
  b.U32("tokenizer.ggml.mask_token_id", 258);
  const uint32_t q_dim = n_head * head_dim, kv_dim = n_head_kv * head_dim;
  b.AddTensor("token_embd.weight", 0, {n_embd, n_vocab});
  b.AddTensor("output_norm.weight", 0, {n_embd});
  if (arch == "llada-moe") b.AddTensor("output.weight", 0, {n_embd, n_vocab});
  for (uint32_t l = 0; l < n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    b.AddTensor(p + "attn_norm.weight", 0, {n_embd});
    b.AddTensor(p + "attn_q.weight", 0, {n_embd, q_dim});
    b.AddTensor(p + "attn_k.weight", 0, {n_embd, kv_dim});
    b.AddTensor(p + "attn_v.weight", 0, {n_embd, kv_dim});
    if (dream) {
      b.AddTensor(p + "attn_q.bias", 0, {q_dim});
      b.AddTensor(p + "attn_k.bias", 0, {kv_dim});
      b.AddTensor(p + "attn_v.bias", 0, {kv_dim});
    }
    b.AddTensor(p + "attn_output.weight", 0, {q_dim, n_embd});
    b.AddTensor(p + "ffn_norm.weight", 0, {n_embd});
    if (moe) {
      b.AddTensor(p + "attn_q_norm.weight", 0, {head_dim});
      b.AddTensor(p + "attn_k_norm.weight", 0, {head_dim});
      b.AddTensor(p + "ffn_gate_inp.weight", 0, {n_embd, n_expert});
      b.AddTensor(p + "ffn_gate_exps.weight", 0, {n_embd, n_ff_exp, n_expert});
      b.AddTensor(p + "ffn_up_exps.weight", 0, {n_embd, n_ff_exp, n_expert});
      b.AddTensor(p + "ffn_down_exps.weight", 0, {n_ff_exp, n_embd, n_expert});
      continue;
    }
    b.AddTensor(p + "ffn_gate.weight", 0, {n_embd, n_ff});
    b.AddTensor(p + "ffn_up.weight", 0, {n_embd, n_ff});
    b.AddTensor(p + "ffn_down.weight", 0, {n_ff, n_embd});
  }
  return b;
}

}  // namespace dllm::testing
