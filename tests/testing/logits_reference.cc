#include "tests/testing/logits_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tests/testing/test_paths.h"

namespace dllm::testing {

std::vector<float> ReadFloats(const std::string& path) {
  const std::string bytes = ReadFileOrDie(path);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

std::vector<int32_t> ReferenceTokens(const Json& ref) {
  std::vector<int32_t> tokens;
  for (const Json& t : ref["tokens"]) tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
  return tokens;
}

LogitsDiff CompareWithReference(const std::vector<float>& logits, int64_t L, int64_t V,
                                const Json& ref, const std::string& base) {
  LogitsDiff m;
  double sum_sq = 0;
  int64_t count = 0;
  const std::vector<float> cols = ReadFloats(base + ".cols.f32");
  const Json& col_ids = ref["cols"];
  const int64_t nc = static_cast<int64_t>(col_ids.size());
  m.row_rms.resize(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    double row_sq = 0;
    for (int64_t j = 0; j < nc; ++j) {
      const double d = double(logits[i * V + col_ids[j].get<int64_t>()]) - cols[i * nc + j];
      m.max_abs = std::max(m.max_abs, std::abs(d));
      row_sq += d * d;
    }
    m.row_rms[i] = std::sqrt(row_sq / nc);
    sum_sq += row_sq;
    count += nc;
  }
  const std::vector<float> full = ReadFloats(base + ".full.f32");
  const Json& full_rows = ref["full_rows"];
  for (size_t r = 0; r < full_rows.size(); ++r) {
    const int64_t i = full_rows[r].get<int64_t>();
    double dot = 0, na = 0, nb = 0;
    for (int64_t v = 0; v < V; ++v) {
      const double a = logits[i * V + v], b = full[r * V + v];
      m.max_abs = std::max(m.max_abs, std::abs(a - b));
      sum_sq += (a - b) * (a - b);
      ++count;
      dot += a * b;
      na += a * a;
      nb += b * b;
    }
    m.min_cosine = std::min(m.min_cosine, dot / std::sqrt(na * nb));
  }
  m.rms = std::sqrt(sum_sq / count);
  const Json& stats = ref["row_stats"];
  for (int64_t i = 0; i < L; ++i) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v) {
      if (logits[i * V + v] > logits[i * V + best]) best = v;
    }
    const bool agree = best == stats["argmax"][i].get<int64_t>();
    m.top1_agree += agree;
    ++m.top1_total;
    const double margin =
        stats["top16_logits"][i][0].get<double>() - stats["top16_logits"][i][1].get<double>();
    if (!agree && margin >= 0.5) ++m.top1_required_fail;
  }
  return m;
}

}  // namespace dllm::testing
