#include "engine/synth/synthetic_model.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/base/status_macros.h"
#include "engine/base/utf8.h"
#include "engine/model/tensor_layout.h"
#include "engine/synth/gguf_writer.h"
#include "engine/synth/quantize.h"
#include "engine/tokenizer/bpe_tokenizer.h"

namespace dllm {
namespace {

// A counter-based generator: the same (seed, tensor, row) gives the same
// values whatever the thread count.
uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Fills `row` with uniform values of standard deviation `std`.
void RandomRow(uint64_t key, float std, float* row, int64_t n) {
  const float scale = std * std::sqrt(3.0f) / 2147483648.0f;  // uniform in [-sqrt3 std, sqrt3 std]
  uint64_t state = SplitMix(key);
  for (int64_t i = 0; i < n; i += 2) {
    state = SplitMix(state);
    row[i] = static_cast<float>(static_cast<int32_t>(state)) * scale;
    if (i + 1 < n) row[i + 1] = static_cast<float>(static_cast<int32_t>(state >> 32)) * scale;
  }
}

}  // namespace

GgmlType FallbackType(GgmlType type, int64_t cols) {
  if (cols % TraitsOf(type).block_size == 0) return type;
  GgmlType fallback = GgmlType::kF16;
  switch (type) {
    case GgmlType::kQ4_K:
      fallback = GgmlType::kQ5_0;
      break;
    case GgmlType::kQ5_K:
      fallback = GgmlType::kQ5_1;
      break;
    case GgmlType::kQ6_K:
      fallback = GgmlType::kQ8_0;
      break;
    default:
      break;
  }
  return cols % TraitsOf(fallback).block_size == 0 ? fallback : GgmlType::kF16;
}

namespace {

bool UseMoreBits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

int32_t FileType(QuantPreset p) {
  switch (p) {
    case QuantPreset::kQ4_K_M:
      return 15;
    case QuantPreset::kQ5_K_M:
      return 17;
    case QuantPreset::kQ6_K:
      return 18;
    case QuantPreset::kQ8_0:
      return 7;
    case QuantPreset::kQ4_0:
      return 2;
    case QuantPreset::kF16:
      return 1;
    case QuantPreset::kF32:
      return 0;
  }
  return 0;
}

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("synth: ", what));
}

int64_t RowsOf(const std::vector<int64_t>& ne) {
  int64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  return rows;
}

bool SyntheticWritesNoShift(Arch arch) {
  return arch == Arch::kLlada || arch == Arch::kLladaMoe || arch == Arch::kLlada2;
}

// The pre-tokenizer llama.cpp's converter writes for each family (the
// synthetic vocabulary has no merges, so the choice only labels the file).
const char* SyntheticPreTokenizer(Arch arch) {
  switch (arch) {
    case Arch::kLlada:
      return "gpt-2";
    case Arch::kLladaMoe:
    case Arch::kLlada2:
      return "bailingmoe2";
    case Arch::kDream:
    case Arch::kRnd1:
      return "qwen2";
    case Arch::kDiffusionGemma:
      return "gemma4";
  }
  return "gpt-2";
}

}  // namespace

namespace {

// Vocabulary, special tokens, RoPE and context of each family's real
// checkpoints (LLaDA-MoE's BOS is not known: none is written).
void SetVocabulary(Arch arch, SyntheticShape* s) {
  switch (arch) {
    case Arch::kLlada:
      s->n_vocab = 126464, s->bos = 126080, s->eos = 126081, s->eot = 126348, s->mask = 126336;
      s->rope_theta = 500000, s->rms_eps = 1e-5, s->n_ctx = 4096;
      break;
    case Arch::kDream:
      s->n_vocab = 152064, s->bos = 151665, s->eos = 151643, s->eot = 151645, s->mask = 151666;
      s->rope_theta = 1e6, s->rms_eps = 1e-6, s->n_ctx = 131072;
      break;
    case Arch::kLladaMoe:
      s->n_vocab = 157184, s->bos = -1, s->eos = 156892, s->eot = -1, s->mask = 156895;
      s->rope_theta = 50000, s->rms_eps = 1e-5, s->n_ctx = 8192;
      break;
    case Arch::kRnd1:
      s->n_vocab = 151936, s->bos = -1, s->eos = 151645, s->eot = 151643, s->mask = 151669;
      s->rope_theta = 1e6, s->rms_eps = 1e-6, s->n_ctx = 40960;
      break;
    case Arch::kDiffusionGemma:
      s->n_vocab = 262144, s->bos = 2, s->eos = 1, s->eot = -1, s->mask = 4;
      s->rope_theta = 1e6, s->rope_theta_swa = 1e4, s->rms_eps = 1e-6, s->n_ctx = 262144;
      break;
    case Arch::kLlada2:
      // <|endoftext|> is EOS and padding, <|mask|> the mask (the official
      // generate()'s defaults); no BOS.
      s->n_vocab = 157184, s->bos = -1, s->eos = 156892, s->eot = -1, s->mask = 156895;
      s->rope_theta = 600000, s->rms_eps = 1e-6, s->n_ctx = 32768;
      break;
  }
}

// The keys of a custom shape and the field each sets.
struct ShapeKey {
  const char* key;
  int64_t SyntheticShape::*value;
};
constexpr ShapeKey kShapeKeys[] = {
    {"d", &SyntheticShape::n_embd},
    {"l", &SyntheticShape::n_layer},
    {"h", &SyntheticShape::n_head},
    {"kv", &SyntheticShape::n_head_kv},
    {"ff", &SyntheticShape::n_ff},
    {"v", &SyntheticShape::n_vocab},
    {"ctx", &SyntheticShape::n_ctx},
    {"hd", &SyntheticShape::head_dim},
    {"e", &SyntheticShape::n_expert},
    {"eu", &SyntheticShape::n_expert_used},
    {"fe", &SyntheticShape::n_ff_exp},
    // llada2: expert groups and those kept, leading dense layers, the shared expert's width.
    {"g", &SyntheticShape::n_expert_groups},
    {"gu", &SyntheticShape::n_expert_groups_used},
    {"dl", &SyntheticShape::n_dense_lead},
    {"fs", &SyntheticShape::n_ff_shared},
};

absl::Status ParseCustomShape(absl::string_view spec, SyntheticShape* s) {
  for (absl::string_view kv : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    int64_t v = 0;
    if (!absl::SimpleAtoi(p.second, &v) || v < 1 || v > (int64_t{1} << 24)) {
      return Invalid(absl::StrCat("custom shape: '", kv, "' is not key=positive integer"));
    }
    const auto field = std::find_if(std::begin(kShapeKeys), std::end(kShapeKeys),
                                    [&](const ShapeKey& k) { return p.first == k.key; });
    if (field == std::end(kShapeKeys)) {
      return Invalid(absl::StrCat("custom shape: unknown key '", p.first,
                                  "' (d l h kv ff v ctx hd e eu fe; llada2: g gu dl fs)"));
    }
    s->*field->value = v;
  }
  if (s->n_head_kv == 0) s->n_head_kv = s->n_head;
  if (s->n_vocab < 260) return Invalid("custom shape: v must be at least 260");
  s->eos = static_cast<int32_t>(s->n_vocab - 4), s->bos = s->eos + 1, s->eot = s->eos + 2,
  s->mask = s->eos + 3;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SyntheticShape> SyntheticShapeFor(Arch arch, absl::string_view name) {
  const bool moe = TraitsOf(arch).moe;
  SyntheticShape s;
  s.name = std::string(name);
  SetVocabulary(arch, &s);
  if ((name == "8b" && arch == Arch::kLlada) || (name == "7b" && arch == Arch::kDream)) {
    if (arch == Arch::kLlada) {
      s.n_embd = 4096, s.n_layer = 32, s.n_head = 32, s.n_head_kv = 32, s.n_ff = 12288;
    } else {
      s.n_embd = 3584, s.n_layer = 28, s.n_head = 28, s.n_head_kv = 4, s.n_ff = 18944;
    }
  } else if (name == "7b-a1b" && arch == Arch::kLladaMoe) {
    s.n_embd = 2048, s.n_layer = 16, s.n_head = 16, s.n_head_kv = 16, s.n_ff = 8192;
    s.n_expert = 64, s.n_expert_used = 8, s.n_ff_exp = 1024;
  } else if (name == "30b-a3b" && arch == Arch::kRnd1) {
    s.n_embd = 2048, s.n_layer = 48, s.n_head = 32, s.n_head_kv = 4, s.head_dim = 128;
    s.n_ff = 6144, s.n_expert = 128, s.n_expert_used = 8, s.n_ff_exp = 768;
  } else if (name == "26b-a4b" && arch == Arch::kDiffusionGemma) {
    s.n_embd = 2816, s.n_layer = 30, s.n_head = 16, s.n_head_kv = 8, s.head_dim = 512;
    s.n_head_kv_global = 2, s.head_dim_swa = 256, s.window = 1024, s.global_every = 6;
    s.n_ff = 2112, s.n_expert = 128, s.n_expert_used = 8, s.n_ff_exp = 704, s.canvas = 256;
  } else if (name == "tiny" && arch == Arch::kDiffusionGemma) {
    s.n_embd = 256, s.n_layer = 4, s.n_head = 4, s.n_head_kv = 2, s.head_dim = 128;
    s.n_head_kv_global = 1, s.head_dim_swa = 64, s.window = 16, s.global_every = 3;
    s.n_ff = 512, s.n_expert = 8, s.n_expert_used = 2, s.n_ff_exp = 256, s.canvas = 32;
    s.n_vocab = 8256, s.n_ctx = 2048;
  } else if (name == "mini" && arch == Arch::kLlada2) {
    s.n_embd = 2048, s.n_layer = 20, s.n_head = 16, s.n_head_kv = 4, s.head_dim = 128;
    s.n_ff = 5120, s.n_expert = 256, s.n_expert_used = 8, s.n_ff_exp = 512;
    s.n_dense_lead = 1, s.n_expert_groups = 8, s.n_expert_groups_used = 4, s.n_ff_shared = 512;
    s.expert_weights_scale = 2.5;
  } else if (name == "tiny" && arch == Arch::kLlada2) {
    s.n_embd = 256, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.head_dim = 64;
    s.n_ff = 512, s.n_expert = 16, s.n_expert_used = 4, s.n_ff_exp = 256;
    s.n_dense_lead = 1, s.n_expert_groups = 4, s.n_expert_groups_used = 2, s.n_ff_shared = 256;
    s.expert_weights_scale = 2.5;
    s.n_vocab = 8256, s.eos = 8192, s.mask = 8194, s.n_ctx = 2048;
  } else if (name == "1b" && !moe) {
    s.n_embd = 2048, s.n_layer = 16, s.n_head = 16;
    s.n_head_kv = arch == Arch::kLlada ? 16 : 4, s.n_ff = 5632;
  } else if (name == "tiny") {
    s.n_embd = 256, s.n_layer = 2, s.n_head = 4, s.n_head_kv = arch == Arch::kDream ? 2 : 4;
    s.n_ff = 768;
    s.n_vocab = 8256;
    s.bos = 8193, s.eos = 8192, s.eot = 8195, s.mask = 8194;
    s.n_ctx = 2048;
    if (arch == Arch::kLladaMoe) {
      s.n_expert = 8, s.n_expert_used = 2, s.n_ff_exp = 256, s.n_ff = 512;
    } else if (arch == Arch::kRnd1) {
      s.n_head_kv = 2, s.head_dim = 128;
      s.n_expert = 8, s.n_expert_used = 3, s.n_ff_exp = 256, s.n_ff = 768;
    }
  } else if (absl::StartsWith(name, "custom:")) {
    s.name = "custom";
    DLLM_RETURN_IF_ERROR(ParseCustomShape(name.substr(7), &s));
  } else {
    return Invalid(absl::StrCat("unknown shape '", name, "' for ", ArchName(arch),
                                " (llada: 8b, 1b; dream: 7b, 1b; llada-moe: 7b-a1b; rnd1: "
                                "30b-a3b; diffusion-gemma: 26b-a4b; llada2: mini; all: tiny, "
                                "custom:... (not diffusion-gemma))"));
  }
  if (s.n_embd == 0 || s.n_layer == 0 || s.n_head == 0 || s.n_ff == 0 ||
      (s.head_dim == 0 && s.n_embd % s.n_head != 0) || s.n_head % s.n_head_kv != 0 ||
      s.HeadDim() % 2 != 0) {
    return Invalid(
        "shape needs d, l, h, ff with d a multiple of h (or hd set), h a multiple of "
        "kv and an even head size");
  }
  if (moe && (s.n_expert == 0 || s.n_expert_used == 0 || s.n_ff_exp == 0 ||
              s.n_expert_used > s.n_expert)) {
    return Invalid(
        "a MoE shape needs e (experts) >= eu (active experts) >= 1 and fe (expert "
        "FFN width)");
  }
  if (TraitsOf(arch).gemma && (s.n_head_kv_global < 1 || s.n_head % s.n_head_kv_global != 0 ||
                               s.head_dim_swa < 2 || s.head_dim_swa % 2 != 0 || s.window < 1 ||
                               s.global_every < 1 || s.canvas < 1 || s.canvas >= s.n_ctx)) {
    return Invalid("a diffusion-gemma shape needs its sliding and global layers' shapes");
  }
  if (TraitsOf(arch).ling_moe &&
      (s.n_expert % s.n_expert_groups != 0 || s.n_expert_groups_used > s.n_expert_groups ||
       s.n_dense_lead > s.n_layer)) {
    return Invalid("a llada2 shape needs g (groups) dividing e, gu <= g and dl <= l");
  }
  if (TraitsOf(arch).q_is_n_embd && s.n_head * s.HeadDim() != s.n_embd) {
    return Invalid(absl::StrCat(ArchName(arch), " needs h x hd == d"));
  }
  return s;
}

absl::StatusOr<QuantPreset> ParseQuantPreset(absl::string_view name) {
  for (QuantPreset p :
       {QuantPreset::kQ4_K_M, QuantPreset::kQ5_K_M, QuantPreset::kQ6_K, QuantPreset::kQ8_0,
        QuantPreset::kQ4_0, QuantPreset::kF16, QuantPreset::kF32}) {
    if (name == QuantPresetName(p)) return p;
  }
  return Invalid(
      absl::StrCat("unknown type '", name, "' (q4_k_m, q5_k_m, q6_k, q8_0, q4_0, f16, f32)"));
}

const char* QuantPresetName(QuantPreset p) {
  switch (p) {
    case QuantPreset::kQ4_K_M:
      return "q4_k_m";
    case QuantPreset::kQ5_K_M:
      return "q5_k_m";
    case QuantPreset::kQ6_K:
      return "q6_k";
    case QuantPreset::kQ8_0:
      return "q8_0";
    case QuantPreset::kQ4_0:
      return "q4_0";
    case QuantPreset::kF16:
      return "f16";
    case QuantPreset::kF32:
      return "f32";
  }
  return "?";
}

GgmlType PresetTensorType(QuantPreset preset, absl::string_view tensor, int64_t layer,
                          int64_t n_layer) {
  // llama-quantize never quantizes the MoE router.
  if (absl::StrContains(tensor, "ffn_gate_inp.weight")) return GgmlType::kF32;
  const bool output = tensor == "output.weight";
  const bool more_bits_kind =
      absl::StrContains(tensor, "attn_v.weight") || absl::StrContains(tensor, "ffn_down");
  switch (preset) {
    case QuantPreset::kQ4_K_M:
    case QuantPreset::kQ5_K_M: {
      const GgmlType base = preset == QuantPreset::kQ4_K_M ? GgmlType::kQ4_K : GgmlType::kQ5_K;
      if (output || (more_bits_kind && UseMoreBits(layer, n_layer))) return GgmlType::kQ6_K;
      return base;
    }
    case QuantPreset::kQ6_K:
      return GgmlType::kQ6_K;
    case QuantPreset::kQ8_0:
      return GgmlType::kQ8_0;
    case QuantPreset::kQ4_0:
      return output ? GgmlType::kQ6_K : GgmlType::kQ4_0;
    case QuantPreset::kF16:
      return GgmlType::kF16;
    case QuantPreset::kF32:
      return GgmlType::kF32;
  }
  return GgmlType::kF32;
}

absl::Status WriteSyntheticModel(Arch arch, const SyntheticShape& s, QuantPreset preset,
                                 uint64_t seed, const std::string& path,
                                 const std::function<void(uint64_t, uint64_t)>& progress) {
  const std::string a(ArchName(arch));
  const ArchTraits& traits = TraitsOf(arch);
  const int64_t head_dim = s.HeadDim();
  DLLM_ASSIGN_OR_RETURN(GgufWriter w, GgufWriter::Create(path));
  w.AddString("general.architecture", a);
  w.AddString("general.name", absl::StrCat("synthetic-", a, "-", s.name));
  w.AddUint32("general.file_type", static_cast<uint32_t>(FileType(preset)));
  w.AddUint32(a + ".context_length", static_cast<uint32_t>(s.n_ctx));
  w.AddUint32(a + ".embedding_length", static_cast<uint32_t>(s.n_embd));
  w.AddUint32(a + ".block_count", static_cast<uint32_t>(s.n_layer));
  w.AddUint32(a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.AddUint32(a + ".attention.head_count", static_cast<uint32_t>(s.n_head));
  const bool gemma = traits.gemma;
  // Gemma 4's layer pattern: true = sliding.
  std::vector<bool> sliding(static_cast<size_t>(s.n_layer), false);
  std::vector<int32_t> head_count_kv(static_cast<size_t>(s.n_layer),
                                     static_cast<int32_t>(s.n_head_kv));
  if (gemma) {
    std::vector<uint8_t> pattern(sliding.size());
    for (size_t l = 0; l < sliding.size(); ++l) {
      sliding[l] = static_cast<int64_t>(l) % s.global_every != s.global_every - 1;
      pattern[l] = sliding[l] ? 1 : 0;
      if (!sliding[l]) head_count_kv[l] = static_cast<int32_t>(s.n_head_kv_global);
    }
    w.AddInt32Array(a + ".attention.head_count_kv", head_count_kv);
    w.AddScalarArray(a + ".attention.sliding_window_pattern", GgufValueType::kBool, pattern.data(),
                     pattern.size());
    w.AddUint32(a + ".attention.sliding_window", static_cast<uint32_t>(s.window));
    w.AddUint32(a + ".attention.key_length_swa", static_cast<uint32_t>(s.head_dim_swa));
    w.AddUint32(a + ".attention.value_length_swa", static_cast<uint32_t>(s.head_dim_swa));
    w.AddUint32(a + ".rope.dimension_count_swa", static_cast<uint32_t>(s.head_dim_swa));
    w.AddFloat32(a + ".rope.freq_base_swa", static_cast<float>(s.rope_theta_swa));
    w.AddFloat32(a + ".final_logit_softcapping", 30.0f);
    w.AddBool(a + ".attention.causal", false);
    w.AddUint32("diffusion.canvas_length", static_cast<uint32_t>(s.canvas));
  } else {
    w.AddUint32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  }
  // LLaDA2 turns half of each head (partial_rotary_factor 0.5).
  const int64_t rope_dims = traits.ling_moe ? head_dim / 2 : head_dim;
  w.AddUint32(a + ".rope.dimension_count", static_cast<uint32_t>(rope_dims));
  if (s.head_dim > 0) {
    w.AddUint32(a + ".attention.key_length", static_cast<uint32_t>(head_dim));
    w.AddUint32(a + ".attention.value_length", static_cast<uint32_t>(head_dim));
  }
  if (traits.moe) {
    w.AddUint32(a + ".expert_count", static_cast<uint32_t>(s.n_expert));
    w.AddUint32(a + ".expert_used_count", static_cast<uint32_t>(s.n_expert_used));
    w.AddUint32(a + ".expert_feed_forward_length", static_cast<uint32_t>(s.n_ff_exp));
  }
  if (traits.ling_moe) {
    // The keys the fork's converter writes (BailingMoeV2Model, LLaDA2MoeModel).
    w.AddUint32(a + ".expert_group_count", static_cast<uint32_t>(s.n_expert_groups));
    w.AddUint32(a + ".expert_group_used_count", static_cast<uint32_t>(s.n_expert_groups_used));
    w.AddUint32(a + ".expert_gating_func", 2);  // sigmoid
    w.AddString(a + ".rope.scaling.type", "none");
    w.AddUint32(a + ".leading_dense_block_count", static_cast<uint32_t>(s.n_dense_lead));
    w.AddUint32(a + ".vocab_size", static_cast<uint32_t>(s.n_vocab));
    w.AddUint32(a + ".expert_shared_feed_forward_length", static_cast<uint32_t>(s.n_ff_shared));
    w.AddFloat32(a + ".expert_weights_scale", static_cast<float>(s.expert_weights_scale));
    w.AddUint32(a + ".expert_shared_count", s.n_ff_shared > 0 ? 1 : 0);
    w.AddBool(a + ".expert_weights_norm", true);
  }
  w.AddFloat32(a + ".rope.freq_base", static_cast<float>(s.rope_theta));
  w.AddFloat32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(s.rms_eps));
  // As llama.cpp's converters: LLaDA and LLaDA-MoE write false; Dream and
  // RND1 leave the key out (llama-diffusion-cli then shifts).
  if (SyntheticWritesNoShift(arch)) w.AddBool("diffusion.shift_logits", false);

  std::vector<std::string> tokens(static_cast<size_t>(s.n_vocab));
  std::vector<int32_t> types(static_cast<size_t>(s.n_vocab), 5);  // unused
  if (gemma) {
    // Gemma 4's layout: the control tokens first (<pad> 0, <eos> 1, <bos>
    // 2, <unk> 3, <mask> 4), its turn markers, then raw UTF-8 pieces with
    // spaces written U+2581: every printable ASCII character and newline,
    // "\u2581" with each letter, and fillers. One merge (llama.cpp refuses
    // a gemma4 vocabulary without merges).
    const char* controls[] = {"<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<|turn>", "<turn|>"};
    int64_t t = 0;
    for (const char* c : controls) {
      tokens[static_cast<size_t>(t)] = c;
      types[static_cast<size_t>(t++)] = 3;
    }
    for (int c = 32; c < 127; ++c) tokens[static_cast<size_t>(t++)] = std::string(1, char(c));
    tokens[static_cast<size_t>(t++)] = "\n";
    tokens[static_cast<size_t>(t++)] = "\u2581";
    for (char c = 'a'; c <= 'z'; ++c)
      tokens[static_cast<size_t>(t++)] = absl::StrCat("\u2581", std::string(1, c));
    for (int64_t i = 0; i < t; ++i) {
      if (types[static_cast<size_t>(i)] == 5) types[static_cast<size_t>(i)] = 1;
    }
    for (; t < s.n_vocab; ++t) tokens[static_cast<size_t>(t)] = absl::StrCat("[SYN", t, "]");
    w.AddString("tokenizer.ggml.model", "gemma4");
    w.AddString("tokenizer.ggml.pre", SyntheticPreTokenizer(arch));
    w.AddStringArray("tokenizer.ggml.tokens", tokens);
    w.AddInt32Array("tokenizer.ggml.token_type", types);
    w.AddStringArray("tokenizer.ggml.merges", {"\u2581 t"});
  } else {
    // A byte-level vocabulary: the 256 byte tokens (so any text encodes),
    // the special tokens at the real checkpoints' ids, and fillers.
    const std::array<uint32_t, 256> byte_cp = ByteToCodepoint();
    for (int b = 0; b < 256; ++b) {
      AppendUtf8(byte_cp[b], &tokens[b]);
      types[b] = 1;
    }
    for (int64_t t = 256; t < s.n_vocab; ++t) tokens[t] = absl::StrCat("[SYN", t, "]");
    const std::pair<int32_t, const char*> specials[] = {
        {s.bos, "<|startoftext|>"},
        {s.eos, "<|endoftext|>"},
        {s.eot, "<|eot_id|>"},
        {s.mask, arch == Arch::kLlada ? "<|mdm_mask|>" : "<|mask|>"}};
    for (const auto& [id, text] : specials) {
      if (id < 0) continue;
      if (id < 256 || id >= s.n_vocab) return Invalid("special token ids collide with byte tokens");
      tokens[id] = text;
      types[id] = 3;
    }
    w.AddString("tokenizer.ggml.model", "gpt2");
    w.AddString("tokenizer.ggml.pre", SyntheticPreTokenizer(arch));
    w.AddStringArray("tokenizer.ggml.tokens", tokens);
    w.AddInt32Array("tokenizer.ggml.token_type", types);
    w.AddStringArray("tokenizer.ggml.merges", {});
  }
  if (s.bos >= 0) w.AddUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(s.bos));
  w.AddUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(s.eos));
  if (s.eot >= 0) w.AddUint32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(s.eot));
  w.AddUint32("tokenizer.ggml.mask_token_id", static_cast<uint32_t>(s.mask));
  w.AddBool("tokenizer.ggml.add_bos_token", (arch == Arch::kLlada || gemma) && s.bos >= 0);
  if (traits.ling_moe) {
    // The user's text as it is: llama-diffusion-cli always renders a chat
    // template (ChatML without one), and the fork's block mode aborts once
    // the rendered prompt reaches a block, which the synthetic byte
    // vocabulary's Ling turn markers alone would (scripts/bench-llada2-vs-fork).
    w.AddString("tokenizer.chat_template",
                "{% for message in messages %}{{ message['content'] }}{% endfor %}");
  }

  ModelConfig config;
  config.arch = arch;
  config.n_embd = s.n_embd, config.n_layer = s.n_layer, config.n_head = s.n_head;
  config.n_head_kv = s.n_head_kv, config.head_dim = head_dim, config.n_ff = s.n_ff;
  config.n_vocab = s.n_vocab;
  config.n_expert = s.n_expert, config.n_expert_used = s.n_expert_used;
  config.n_ff_exp = s.n_ff_exp;
  if (gemma) {
    config.layers.assign(static_cast<size_t>(s.n_layer), GemmaBaseLayer(config));
    std::vector<int64_t> kv(head_count_kv.begin(), head_count_kv.end());
    std::vector<bool> value_is_key(sliding.size());
    for (size_t l = 0; l < sliding.size(); ++l) {
      value_is_key[l] = !sliding[l];  // global layers have no attn_v, as the real model
      if (sliding[l]) {
        config.layers[l].attention = AttentionKind::kSliding;
        config.layers[l].window = static_cast<int32_t>(s.window);
      }
    }
    ShapeGemmaLayers(s.head_dim_swa, kv, value_is_key, &config);
    // A quarter of each global head turns (proportional RoPE): 1 for those
    // pairs, 1e30 (in effect no rotation) for the rest, as the converter writes.
    RopeSpec global{RopeType::kNeox, s.rope_theta, head_dim, {}};
    global.freq_factors.assign(static_cast<size_t>(head_dim / 2), 1e30f);
    std::fill(global.freq_factors.begin(), global.freq_factors.begin() + head_dim / 8, 1.0f);
    config.ropes = {global, RopeSpec{RopeType::kNeox, s.rope_theta_swa, s.head_dim_swa, {}}};
  } else {
    config.layers = UniformLayers(config);
    if (traits.ling_moe) {
      ShapeLingLayers(
          {s.n_dense_lead, RouterScore::kSigmoid, s.n_expert_groups, s.n_expert_groups_used, true,
           static_cast<float>(s.expert_weights_scale), s.n_ff_shared},
          &config);
    }
  }
  struct Planned {
    std::string name;
    std::vector<int64_t> ne;
    GgmlType type;
  };
  std::vector<Planned> plan;
  uint64_t total_bytes = 0;
  for (const ExpectedTensor& e : ExpectedTensors(config)) {
    int64_t layer = -1;
    if (absl::StartsWith(e.name, "blk.")) {
      const std::vector<std::string> parts = absl::StrSplit(e.name, '.');
      (void)absl::SimpleAtoi(parts[1], &layer);
    }
    const GgmlType type =
        e.ne.size() == 1
            ? GgmlType::kF32
            : FallbackType(PresetTensorType(preset, e.name, layer, s.n_layer), e.ne[0]);
    DLLM_RETURN_IF_ERROR(w.AddTensor(e.name, type, e.ne));
    plan.push_back({e.name, e.ne, type});
    total_bytes += RowBytes(type, e.ne[0]) * RowsOf(e.ne);
  }
  DLLM_RETURN_IF_ERROR(w.WriteHeader());

  // Quantizing billions of random weights with the reference quantizer
  // would take most of an hour, so each large tensor quantizes a pool of
  // kPoolRows random rows and draws every row from it (pseudo-randomly).
  // Speed does not depend on weight values; the file is still a valid model
  // whose every block came from the quantizer.
  constexpr int64_t kPoolRows = 256;
  constexpr int64_t kUniqueValues = int64_t{1} << 22;
  uint64_t done = 0;
  std::vector<float> values;
  std::vector<uint8_t> pool, bytes;
  for (size_t t = 0; t < plan.size(); ++t) {
    const Planned& p = plan[t];
    const int64_t cols = p.ne[0];
    const int64_t rows = RowsOf(p.ne);
    const size_t row_bytes = RowBytes(p.type, cols);
    // Norm weights and scales are 1 (Gemma's scales too: router input,
    // expert outputs, the layer scalars).
    const bool is_norm = p.ne.size() == 1 &&
                         (absl::StrContains(p.name, "norm") || absl::StrContains(p.name, "scale"));
    const bool is_rope_freqs = p.name == kRopeFreqsTensor;
    // Weights ~ 1/sqrt(fan_in) keep activations in range; biases small.
    const float std = p.ne.size() == 1 ? 0.02f : 1.0f / std::sqrt(static_cast<float>(cols));
    // Small tensors (every tensor of a tiny test model) quantize every row.
    const int64_t pool_rows = rows * cols <= kUniqueValues ? rows : std::min(rows, kPoolRows);
    values.resize(static_cast<size_t>(pool_rows * cols));
    pool.resize(static_cast<size_t>(pool_rows) * row_bytes);
    const uint64_t tensor_key = SplitMix(seed ^ (uint64_t(t) << 40));
    tbb::parallel_for(int64_t{0}, pool_rows, [&](int64_t r) {
      float* row = values.data() + r * cols;
      if (is_rope_freqs) {
        std::copy(config.ropes[0].freq_factors.begin(), config.ropes[0].freq_factors.end(), row);
      } else if (is_norm) {
        std::fill(row, row + cols, 1.0f);
      } else {
        RandomRow(tensor_key ^ uint64_t(r), std, row, cols);
      }
      QuantizeRow(p.type, row, pool.data() + r * row_bytes, cols);
    });
    const int64_t chunk_rows =
        std::max<int64_t>(1, (int64_t{16} << 20) / static_cast<int64_t>(row_bytes));
    for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
      const int64_t nr = std::min(chunk_rows, rows - r0);
      bytes.resize(static_cast<size_t>(nr) * row_bytes);
      for (int64_t r = 0; r < nr; ++r) {
        const int64_t src = rows <= pool_rows
                                ? r0 + r
                                : static_cast<int64_t>(SplitMix(tensor_key + r0 + r) % kPoolRows);
        std::memcpy(bytes.data() + r * row_bytes, pool.data() + src * row_bytes, row_bytes);
      }
      DLLM_RETURN_IF_ERROR(w.WriteTensorData(bytes.data(), bytes.size()));
      done += bytes.size();
      if (progress) progress(done, total_bytes);
    }
  }
  return w.Finish();
}

}  // namespace dllm
